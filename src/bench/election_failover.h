// bench/election_failover.h — `warden bench --election-failover N`: how long an election
// takes to move on when its leader's process dies.
//
// Each sample: a leader process (`warden elect … -- sleep`, started from this executable,
// in a process group of its own) wins the election; a candidate in this process queues
// behind it; the leader's process group is killed with -9; the sample is the time from
// the kill to the candidate's campaign returning with the leadership. Nobody releases
// anything, so it is what is left of the lease (the watchdog renews every TTL/3: 2/3 to
// 1 TTL) plus what the engine adds to notice that it ran out and hand the election on.
// An observer on a client of its own (Election::observe, default poll) is timed too:
// kill → it reports the successor, which is the failover plus what observing adds (a
// poll where the engine cannot watch). The report gives each figure as a multiple of
// the TTL, the run's own baseline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "bench/stats.h"

namespace warden::bench {

struct ElectionFailoverResult {
  std::chrono::milliseconds ttl{0};
  Samples failover_ns;  // one per sample: kill → the next leader's grant
  Samples observed_ns;  // one per sample: kill → an observer reports the next leader
};

// Runs `samples` failovers of the election "bench/failover" on `url` with leases of
// `ttl`, starting leaders with `warden_exe`. Throws warden::Error (engine failures, an
// engine without elections) or std::runtime_error (a leader process that could not be
// started or never led).
ElectionFailoverResult election_failover(const std::string& url, const std::string& warden_exe,
                                         int samples, std::chrono::milliseconds ttl);

}  // namespace warden::bench
