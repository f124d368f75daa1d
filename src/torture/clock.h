// torture/clock.h — the one clock of a torture run: CLOCK_MONOTONIC in nanoseconds,
// shared by every process on the machine (std::chrono::steady_clock is the same clock
// on Linux, but its epoch is not promised to be).
#pragma once

#include <time.h>

#include "torture/history.h"

namespace warden::torture {

inline Nanos now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace warden::torture
