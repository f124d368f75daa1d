// bench/run.h — N clients running lock/unlock cycles, each on its own thread, for a
// fixed time: the engine of every throughput figure of `warden bench`.
//
// A run has three steps. Set-up (connections, lock objects) happens before the clock
// starts, in the caller. Then every thread is released at once and loops
// `cycle()` until the deadline; a cycle counts if it finished before the deadline, so
// cycles/s = counted cycles / duration exactly. At the deadline the run's stop_token
// is requested: an acquire still waiting then returns empty and is not counted, so no
// thread outlives the run by more than one backend call.
//
// The hot path takes no lock: each thread appends acquire latencies to its own vector
// and publishes its cycle count through its own atomic (relaxed), which only the
// progress line reads. The vectors are merged after the threads are joined.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace warden::bench {

// One client's side of a run.
class CycleClient {
 public:
  virtual ~CycleClient() = default;
  // One acquire + release. Returns the acquire latency (from the first request to the
  // grant), or nullopt if `stop` ended the acquire first. Throws warden::Error on a
  // backend failure, which ends the whole run.
  virtual std::optional<std::chrono::nanoseconds> cycle(const std::stop_token& stop) = 0;
};

struct RunResult {
  std::uint64_t cycles = 0;             // completed before the deadline, all clients
  std::chrono::nanoseconds elapsed{0};  // the run's duration
  Samples acquire_ns;                   // one per counted cycle
  double cycles_per_second() const;
};

// The live progress line (stderr) of one phase.
struct Progress {
  bool enabled = false;  // only when stderr is a terminal
  std::string label;     // e.g. "warden://127.0.0.1:7380"
};

// Runs every client on its own thread for `duration` (> 0). The clients stay usable
// for another run. Throws the first error a client threw (the other clients are
// stopped first).
RunResult run_timed(const std::vector<std::unique_ptr<CycleClient>>& clients,
                    std::chrono::nanoseconds duration, const Progress& progress);

// Adds the run `part` to `total` (cycles, time and samples).
void accumulate(RunResult& total, RunResult&& part);

// true if stderr is a terminal (the progress line is shown then only).
bool stderr_is_terminal();

}  // namespace warden::bench
