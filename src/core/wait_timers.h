// core/wait_timers.h — when the one thread that drives an engine's asynchronous waits next
// looks at each of them (an attempt, a poll, a call's op_timeout, a deadline), earliest
// first; and how that thread tells a wait and forgets it. redis://'s and zk://'s async
// waits and redlock://'s async retries keep their waits so.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <set>
#include <utility>

#include "core/engine.h"

namespace warden::core {

class WaitTimers {
 public:
  // Moves the timer of wait `id` to `at`, or clears it (nullopt). `slot` is the wait's
  // own record of its timer, kept in the wait.
  void set(std::optional<Clock::time_point>& slot, std::uint64_t id,
           std::optional<Clock::time_point> at) {
    if (slot) timers_.erase({*slot, id});
    slot = at;
    if (at) timers_.emplace(*at, id);
  }
  // The wait whose timer is the earliest, if it is due by `now`.
  std::optional<std::uint64_t> due(Clock::time_point now) const {
    if (timers_.empty() || timers_.begin()->first > now) return std::nullopt;
    return timers_.begin()->second;
  }
  // The earliest timer (Clock::time_point::max() without any).
  Clock::time_point next() const {
    return timers_.empty() ? Clock::time_point::max() : timers_.begin()->first;
  }
  void clear() { timers_.clear(); }

 private:
  std::set<std::pair<Clock::time_point, std::uint64_t>> timers_;
};

// Tells the wait at `it` in `waits` (the thread's map of ids to owned waits, each with an
// `AcquireDone done`) and forgets it. It is destroyed first, so that its stop callback and
// whatever else it holds end before it is told; and the last reference to the Client may
// go with `done` (the engine, and the thread's stop(), with it), so the caller touches
// nothing of the engine after this unless its thread is still running.
template <class Waits>
void tell_and_forget(Waits& waits, typename Waits::iterator it, std::optional<Granted> granted,
                     std::exception_ptr error) {
  auto done = std::move(it->second->done);
  auto gone = std::move(it->second);
  waits.erase(it);
  gone.reset();
  done(std::move(granted), error);
}

}  // namespace warden::core
