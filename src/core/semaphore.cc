#include "warden/semaphore.h"

#include "core/client_state.h"
#include "warden/error.h"

namespace warden {

Semaphore::Semaphore(std::shared_ptr<detail::ClientState> client, std::string group,
                     std::string name, std::uint32_t permits, LockOptions options)
    : client_(std::move(client)),
      group_(std::move(group)),
      name_(std::move(name)),
      permits_(permits),
      options_(options) {}

Lease Semaphore::acquire(std::uint32_t n, Wait wait, std::stop_token stop) {
  auto hold = client_->acquire_permits(core::LockKey{group_, name_}, permits_, n, options_,
                                       wait.deadline(), std::move(stop));
  if (!hold) return Lease();
  return Lease(client_, std::move(hold), Mode::shared);
}

AcquireHandle Semaphore::acquire_async(std::uint32_t n, Wait wait, AcquireCallback done,
                                       Executor executor) {
  auto request = client_->permits_request(core::LockKey{group_, name_}, permits_, n, options_,
                                          wait.deadline(), {});
  return AcquireHandle(
      client_->grant_async(client_, std::move(request), std::move(done), std::move(executor)));
}

AcquireAwaitable Semaphore::acquire_co(std::uint32_t n, Wait wait, Executor executor) {
  client_->permits_request(core::LockKey{group_, name_}, permits_, n, options_, wait.deadline(),
                           {});  // bad numbers throw here, before the coroutine waits
  return AcquireAwaitable([semaphore = *this, n, wait, executor](AcquireCallback done) mutable {
    return semaphore.acquire_async(n, wait, std::move(done), executor);
  });
}

}  // namespace warden
