#include "engines/redis/acquire_plan.h"

#include <utility>

#include "engines/redis/scripts.h"

namespace warden::engines::redis {

AcquirePlan AcquirePlan::of(const core::AcquireRequest& request, std::string owner,
                            std::chrono::milliseconds waiter_ttl) {
  AcquirePlan plan;
  plan.entry = std::string(request.mode == Mode::exclusive ? "x" : "s") +
               (request.capacity > 0 ? std::to_string(request.permits) : std::string()) + ':' +
               std::to_string(waiter_ttl.count()) + ':' + owner;
  plan.owner = std::move(owner);
  plan.waits = request.deadline > Clock::now();
  return plan;
}

resp_client::ScriptCall AcquirePlan::attempt(const core::AcquireRequest& request,
                                             const LockKeys& keys) const {
  return resp_client::ScriptCall{
      &k_acquire_script,
      keys.all(),
      {keys.channel, entry, request.mode == Mode::exclusive ? "x" : "s",
       std::to_string(request.options.ttl.count()),
       std::to_string(request.options.lock_delay.count()),
       request.options.fairness == Fairness::fifo ? "1" : "0", waits ? "1" : "0", owner,
       std::to_string(request.capacity), std::to_string(request.permits), request.value}};
}

resp_client::ScriptCall AcquirePlan::withdraw(const LockKeys& keys) const {
  return resp_client::ScriptCall{&k_withdraw_script, keys.all(), {keys.channel, entry}};
}

}  // namespace warden::engines::redis
