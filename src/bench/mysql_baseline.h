// bench/mysql_baseline.h — the MariaDB / MySQL baseline of `warden bench`: the raw cost of a
// GET_LOCK lock, through libmariadb's plain blocking calls.
//
//   acquire:  SELECT GET_LOCK('wbench:<run>-c<i>-k<k>', 0.2)   (again while it says 0)
//   release:  SELECT RELEASE_LOCK('wbench:<run>-c<i>-k<k>')
//
// One connection per client, on the same key pattern as the warden clients
// (bench_workload.h), under the name prefix "wbench:", which no mysql:// lock name
// ("warden:DATABASE:ID") can start with, so the baseline never touches a warden lock.
// GET_LOCK has one mode: the baseline locks exclusively whatever --mode says. A wait
// is asked in 0.2 s slices so the end of a run is seen while a contended client waits.
// mysql:// does more per grant (the session's idle limit, the token row, one session
// per grant): the ratio is what that costs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/run.h"
#include "bench/workload.h"

namespace warden::bench {

// The prefix of every baseline lock name.
inline constexpr const char* kMysqlBenchPrefix = "wbench:";

// One connection per workload client to the server of `url` (mysql://…, as the engine
// reads it). Throws warden::Error (invalid_argument for a bad URL, permission_denied,
// unavailable).
std::vector<std::unique_ptr<CycleClient>> open_mysql_clients(const std::string& url,
                                                             const Workload& workload);

}  // namespace warden::bench
