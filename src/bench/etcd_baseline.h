// bench/etcd_baseline.h — the etcd baseline of `warden bench`: etcd's own lock service
// (v3lockpb.Lock, served by every member), called over gRPC.
//
//   at open:  LeaseGrant(ttl rounded up to seconds)        one lease per client
//   acquire:  Lock(name, lease) → ownership key            (blocks in the server)
//   release:  Unlock(key)
//
// Each client has its own gRPC channel to the URL's first member, and the lease is kept
// alive (LeaseKeepAlive) between cycles once a third of its TTL has passed, as a
// session would. Clients use the same lock names as the warden clients
// (bench_workload.h), under the key prefix "warden-bench/".
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/run.h"
#include "bench/workload.h"

namespace warden::bench {

// One client per workload client on the etcd at `url` (etcd://HOST:PORT[,...]; auth
// is not supported by the baseline). `timeout` bounds every call. Throws warden::Error
// (invalid_argument for a bad URL, unavailable if etcd is down).
std::vector<std::unique_ptr<CycleClient>> open_etcd_clients(const std::string& url,
                                                            const Workload& workload,
                                                            std::chrono::milliseconds timeout);

}  // namespace warden::bench
