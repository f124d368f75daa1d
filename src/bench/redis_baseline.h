// bench/redis_baseline.h — the baseline of `warden bench`: the lock every Redis tutorial
// shows, on one Redis server or on a Redis Cluster (each key on its slot's master, as
// the map read once at the start says), through hiredis.
//
//   acquire:  SET key value NX PX ttl            (value unique per acquire)
//   release:  EVALSHA <compare-and-delete> 1 key value
//             -- if redis.call("get", KEYS[1]) == ARGV[1] then
//             --   return redis.call("del", KEYS[1]) else return 0 end
//
// The script is loaded once per connection with SCRIPT LOAD. Each client has its own
// connection and runs the same key pattern as the warden clients (bench_workload.h).
// A SET NX that finds the key taken (contended runs) is retried after a random sleep
// of 0.1..1 ms: that lock has no queue, so waiters poll. It has no shared mode either:
// the baseline takes exclusive locks whatever --mode says.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/run.h"
#include "bench/workload.h"

namespace warden::bench {

// The compare-and-delete release script.
extern const char* const kCompareAndDelete;

// One connection per workload client to the Redis at `url` (redis://[USER:PASS@]HOST:PORT[/DB]),
// or to each master its keys live on (redis+cluster://[USER:PASS@]H1:P1,...), each with
// the script loaded. `timeout` bounds the connect and every command. Throws
// warden::Error (invalid_argument for a bad URL, unavailable if Redis is down).
std::vector<std::unique_ptr<CycleClient>> open_redis_clients(const std::string& url,
                                                             const Workload& workload,
                                                             std::chrono::milliseconds timeout);

}  // namespace warden::bench
