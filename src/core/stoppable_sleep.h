// Sleeping that a std::stop_token cuts short: back-offs and pauses between retries in
// threads and waits that a close or a cancelled acquire must end at once.
#pragma once

#include <condition_variable>
#include <mutex>
#include <stop_token>

#include "warden/types.h"

namespace warden::core {

// Sleeps until `until`; false if `stop` was requested first (or already had been).
inline bool sleep_until(Clock::time_point until, const std::stop_token& stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_until(lock, stop, until, [] { return false; });
  return !stop.stop_requested();
}

// Sleeps `delay`; false if `stop` was requested first (or already had been).
inline bool sleep_for(Clock::duration delay, const std::stop_token& stop) {
  return sleep_until(Clock::now() + delay, stop);
}

}  // namespace warden::core
