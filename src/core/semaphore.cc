#include "warden/semaphore.h"

#include "core/client_state.h"

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

}  // namespace warden
