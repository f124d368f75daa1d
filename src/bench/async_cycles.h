// bench/async_cycles.h — `warden bench --async-cycles`: acquire/release cycles per second
// with K operations in flight, asynchronous from one thread against blocking from K
// threads, on the same backend in the same run.
//
// For each K (1, 64, 1024): K locks of their own ("slot-i"), so no cycle waits for
// another.
//   async    — one Client; each slot runs acquire_async → Lease::release_async → the next
//              acquire_async, every step started from the callback of the one before, so
//              the whole load is driven by the Client's completion thread;
//   blocking — one Client; K threads, each acquire (try) → release() on its slot.
// Each side runs for `each` after a warm-up of a tenth of it; a cycle counts when its
// release was confirmed. The figures are this process's view: what the client path
// costs beside the backend's round trips.
#pragma once

#include <string>
#include <vector>

#include "warden/types.h"

namespace warden::bench {

struct AsyncCyclesRow {
  int in_flight = 0;
  double async_per_second = 0;
  double blocking_per_second = 0;
  std::uint64_t async_failed = 0;     // cycles whose acquire or release was told an error
  std::uint64_t blocking_failed = 0;  // or threw
};

struct AsyncCyclesResult {
  double seconds_each = 0;
  std::vector<AsyncCyclesRow> rows;
};

// Runs both sides for each of `in_flight` on `url`, in group "bench-cycles". Throws
// warden::Error for engine failures that stop a side from starting.
AsyncCyclesResult async_cycles(const std::string& url, const std::vector<int>& in_flight,
                               Clock::duration each);

}  // namespace warden::bench
