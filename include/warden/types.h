// warden/types.h — small value types shared by the whole public API.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace warden {

// Leases, waits and the watchdog run on the monotonic clock; the wall clock is never
// used for anything that decides whether a lock is held.
using Clock = std::chrono::steady_clock;

enum class Mode : std::uint8_t {
  exclusive,  // write: one holder
  shared,     // read: any number of holders, none exclusive
};

// "exclusive" / "shared".
std::string_view to_string(Mode mode) noexcept;

// The order in which an engine grants waiting requests (LockOptions::fairness).
enum class Fairness : std::uint8_t {
  // FIFO where the engine has it, the engine's own order (non-fair) otherwise: works on
  // every engine. Capabilities::resolve(automatic) says which one a client gets.
  automatic,
  // FIFO: consecutive shared requests at the head are granted together; a shared request
  // queues behind a waiting exclusive one. An engine without FIFO refuses it
  // (Errc::unsupported).
  fifo,
  // Any request compatible with the current holders is granted at once; one that is not
  // waits (in FIFO order where the engine has a queue). An engine without it refuses it
  // (Errc::unsupported).
  non_fair,
};

// "automatic" / "fifo" / "non-fair".
std::string_view to_string(Fairness fairness) noexcept;

// How long an acquire may wait for the lock.
//
//   Wait::none()        try once; never queue
//   Wait::up_to(d)      wait at most d (d <= 0 is the same as none())
//   Wait::until(t)      wait until t (a time in the past is the same as none())
//   Wait::forever()     wait until granted or cancelled
class Wait {
 public:
  static Wait none() noexcept { return Wait(Clock::time_point::min()); }
  static Wait forever() noexcept { return Wait(Clock::time_point::max()); }
  static Wait until(Clock::time_point deadline) noexcept { return Wait(deadline); }
  template <class Rep, class Period>
  static Wait up_to(std::chrono::duration<Rep, Period> d) noexcept {
    if (d <= d.zero()) return none();
    const auto now = Clock::now();
    // Compare in d's own unit first: casting a huge d to nanoseconds would overflow.
    const auto room = std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(
        Clock::time_point::max() - now);
    if (d >= room) return forever();
    return Wait(now + std::chrono::duration_cast<Clock::duration>(d));
  }

  // The point after which the acquire gives up; min() for none(), max() for forever().
  Clock::time_point deadline() const noexcept { return deadline_; }
  bool is_forever() const noexcept { return deadline_ == Clock::time_point::max(); }

 private:
  explicit Wait(Clock::time_point deadline) noexcept : deadline_(deadline) {}
  Clock::time_point deadline_;
};

// What an engine can do. Asking for something it cannot do fails with
// Errc::unsupported before any I/O; nothing is emulated unsafely.
struct Capabilities {
  bool shared = false;          // Mode::shared
  bool fair = false;            // FIFO queueing (Fairness::fifo)
  bool non_fair = false;        // barging (Fairness::non_fair)
  bool lock_delay = false;      // LockOptions::lock_delay > 0
  bool fencing = true;          // tokens strictly increase per lock
  bool durable_tokens = false;  // ...also across a backend restart
  bool check = true;            // Client::check(sequencer)
  bool semaphore = false;       // Client::semaphore: k of N permits (warden/semaphore.h)
  // Client::multi's members are granted in one step on the backend, waiting without
  // holding any; otherwise (every engine has multi-locks) they are taken one by one.
  bool atomic_multi = false;
  // Client::election: campaigns carry a value and a leader can proclaim a new one
  // (warden/election.h).
  bool election = false;
  // Election::observe is told of each change of a lock's holders by the backend (a push,
  // a watch) instead of finding it at its next poll.
  bool watch = false;
  // LockOptions::cache: the backend tells a client that caches a lock when another asks
  // for it (docs/contract.md, "Lock caching").
  bool cache = false;

  // The fairness a request for `requested` gets: automatic becomes fifo where the engine
  // has it and non_fair otherwise; fifo and non_fair stay as asked (and are refused if
  // the engine lacks them).
  Fairness resolve(Fairness requested) const noexcept {
    if (requested != Fairness::automatic) return requested;
    return fair ? Fairness::fifo : Fairness::non_fair;
  }
};

}  // namespace warden
