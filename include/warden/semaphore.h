// warden/semaphore.h — a named set of N permits, for capping how many processes do a
// thing at once.
//
//   warden::Semaphore encoders = client.semaphore("media", "encoders", 4);
//   if (auto lease = encoders.acquire(1, warden::Wait::up_to(10s))) {
//     encode(job, lease.token());   // at most 4 such leases are held at any time
//   }
//
// Each acquire is a grant of its own on the backend, with its own lease (renewed by the
// watchdog, lost like a lock's) and its own fencing token; tokens of one semaphore
// increase across its grants. Requests are served in FIFO order where the engine has
// it: a request for many permits waits its turn, and smaller requests behind it do not
// pass it. Nothing is reentrant: a thread that acquires twice holds two grants.
//
// The number of permits belongs to the semaphore on the backend, not to the handle:
// while anyone holds or waits for it, a client that opens it with another number is
// refused (Error(invalid_argument)) and changes nothing. A semaphore nobody holds or
// waits for is forgotten, and may then be opened with any number. A lock and a semaphore
// of the same group and name refuse each other the same way.
//
// docs/primitives.md has the state table; Capabilities::semaphore says which engines
// have semaphores (the others refuse with Error(unsupported)).
#pragma once

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "warden/async.h"
#include "warden/lease.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden {

namespace detail {
class ClientState;
}

class Semaphore {
 public:
  const std::string& group() const noexcept { return group_; }
  const std::string& name() const noexcept { return name_; }
  // The semaphore's number of permits.
  std::uint32_t permits() const noexcept { return permits_; }
  const LockOptions& options() const noexcept { return options_; }

  // Acquires `n` permits (1..permits()) as one grant, waiting as `wait` says, giving up
  // early when `stop` is requested. Returns an empty Lease if the wait ran out or was
  // cancelled — that wait leaves no trace on the backend. The Lease's mode() is shared
  // and its permits() is n. Throws Error: invalid_argument (n outside 1..permits(), or
  // the semaphore has another number of permits on the backend, or is a lock there),
  // unsupported (no semaphores, or fairness / lock-delay the engine lacks), unavailable /
  // deadline_exceeded (backend), permission_denied.
  [[nodiscard]] Lease acquire(std::uint32_t n = 1, Wait wait = Wait::forever(),
                              std::stop_token stop = {});
  // The same acquire without blocking (warden/async.h), as Lock::acquire_async: bad
  // numbers throw at once, the outcome goes to `done` exactly once.
  AcquireHandle acquire_async(std::uint32_t n, Wait wait, AcquireCallback done,
                              Executor executor = {});
  [[nodiscard]] AcquireAwaitable acquire_co(std::uint32_t n = 1, Wait wait = Wait::forever(),
                                            Executor executor = {});

 private:
  friend class Client;
  Semaphore(std::shared_ptr<detail::ClientState> client, std::string group, std::string name,
            std::uint32_t permits, LockOptions options);

  std::shared_ptr<detail::ClientState> client_;
  std::string group_;
  std::string name_;
  std::uint32_t permits_;
  LockOptions options_;
};

}  // namespace warden
