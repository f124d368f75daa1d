// bench/zk_baseline.h — the ZooKeeper baseline of `warden bench`: the raw cost of the
// lock recipe's two writes, through the C client.
//
//   acquire:  create(PARENT/x-, EPHEMERAL_SEQUENTIAL)   (synchronous)
//   release:  delete(the created node)
//
// There is no queue and no wait: a create always succeeds, so this is the floor under
// any ZooKeeper lock (a lock also has to look at its predecessors). Each client has its
// own session; PARENT is "/warden-bench/<lock name>" (created up front), the same names
// as the warden clients (bench_workload.h).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/run.h"
#include "bench/workload.h"

namespace warden::bench {

// One session per workload client on the ensemble at `url` (zk://HOST:PORT[,...];
// auth is not supported by the baseline). Throws warden::Error (invalid_argument for a
// bad URL, unavailable if no server answers within `timeout`).
std::vector<std::unique_ptr<CycleClient>> open_zookeeper_clients(const std::string& url,
                                                                 const Workload& workload,
                                                                 std::chrono::milliseconds timeout);

}  // namespace warden::bench
