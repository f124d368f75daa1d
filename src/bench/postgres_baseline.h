// bench/postgres_baseline.h — the PostgreSQL baseline of `warden bench`: the raw cost of a
// session advisory lock, through libpq.
//
//   acquire:  SELECT pg_advisory_lock(kBenchClass, N)
//   release:  SELECT pg_advisory_unlock(kBenchClass, N)
//
// One connection per client, each on locks of its own (N numbers the client's lock
// names), in the two-int4 key space, which the postgres:// engine leaves to
// applications, so the baseline never touches a warden lock. postgres:// does more per
// grant (the token, the marker lock, the lease's idle timeout, one connection per
// grant): the ratio is what that costs.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/run.h"
#include "bench/workload.h"

namespace warden::bench {

// One connection per workload client to the server of `url` (postgres://…, as the
// engine reads it). Throws warden::Error (invalid_argument for a bad URL,
// permission_denied, unavailable).
std::vector<std::unique_ptr<CycleClient>> open_postgres_clients(const std::string& url,
                                                                const Workload& workload);

}  // namespace warden::bench
