// bench/report.h — what `warden bench` prints: a table for people, or one JSON
// object (--json) for scripts. Latencies are given in microseconds in both.
#pragma once

#include <optional>
#include <string>

#include "bench/async_cycles.h"
#include "bench/async_waiters.h"
#include "bench/capacity.h"
#include "bench/election_failover.h"
#include "bench/stats.h"
#include "bench/workload.h"

namespace warden::bench {

// The figures of one timed run.
struct PhaseFigures {
  std::string url;  // redacted: no password
  std::uint64_t cycles = 0;
  double seconds = 0;
  double cycles_per_second = 0;
  LatencySummary acquire;
};

struct BenchReport {
  Workload workload;
  double duration_seconds = 0;  // per side, all rounds together
  int rounds = 1;
  PhaseFigures warden;
  std::optional<PhaseFigures> baseline;   // --baseline
  std::optional<LatencySummary> handoff;  // --handoff-samples > 0
  // warden cycles/s divided by the baseline's; set with the baseline.
  std::optional<double> ratio() const;
};

std::string format_text(const BenchReport& report);
std::string format_json(const BenchReport& report);

std::string format_text(const std::string& url, const HoldLocksResult& result);
std::string format_json(const std::string& url, const HoldLocksResult& result);

std::string format_text(const std::string& url, const IdleConnectionsResult& result);
std::string format_json(const std::string& url, const IdleConnectionsResult& result);

// Sorts the result's samples (summarize).
std::string format_text(const std::string& url, ElectionFailoverResult& result);
std::string format_json(const std::string& url, ElectionFailoverResult& result);
std::string format_text(const std::string& url, const AsyncWaitersResult& result);
std::string format_json(const std::string& url, const AsyncWaitersResult& result);
std::string format_text(const std::string& url, const AsyncCyclesResult& result);
std::string format_json(const std::string& url, const AsyncCyclesResult& result);

}  // namespace warden::bench
