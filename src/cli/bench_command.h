// cli/bench_command.h — `warden bench`: throughput, latency and capacity figures.
//
//   warden bench --url U [--clients N] [--keys K] [--mode exclusive|shared|mixed]
//                [--duration D] [--contended] [--ttl D] [--baseline redis://H:P]
//                [--rounds R] [--handoff-samples M] [--json]
//   warden bench --url warden://H:P --hold-locks N [--key-bytes B] [--json]
//   warden bench --url warden://H:P --idle-connections N [--idle-hold D] [--json]
//
// The first form runs N clients (one warden::Client each) doing acquire + release
// cycles for D (bench_run.h, bench_workload.h), then the same workload on the raw
// single-Redis lock if --baseline is given (bench_redis.h), then M hand-off samples.
// The other two are wardend's capacity checks (bench_capacity.h). docs/performance.md
// explains every figure.
#pragma once

#include <cstdint>
#include <string>

#include "cli/commands.h"

namespace warden::cli {

// The options as given on the command line, before validation.
struct BenchOptions {
  std::string url;  // empty: $WARDEN_URL
  int clients = 1;
  int keys = 1;
  std::string mode = "exclusive";
  std::uint32_t permits = 0;  // > 0: a semaphore of this many per key, one permit per cycle
  int members = 0;            // > 1: a multi-lock of this many keys per cycle
  std::string duration = "10s";
  bool contended = false;
  bool confirm_releases = false;  // Lease::release() per cycle instead of dropping the lease
  bool cache = false;             // every lock cached (LockOptions::cache)
  std::string ttl = "30s";
  std::string baseline;  // redis:// URL, empty: none
  int handoff_samples = 1000;
  int rounds = 1;  // --duration cut into this many alternating warden/baseline slices
  bool json = false;
  std::uint64_t hold_locks = 0;  // > 0: the memory check
  std::size_t key_bytes = 16;
  std::uint64_t idle_connections = 0;  // > 0: the connection check
  std::string idle_hold = "3s";
  int election_failover = 0;  // > 0: this many election failovers (--ttl 1s unless given)
  std::uint64_t async_waiters = 0;  // > 0: this many asynchronous acquires waiting at once
  bool async_cycles = false;  // cycles/s at 1, 64, 1024 in flight, async against blocking
};

// Validates `options` (Failure(kUsage) before any I/O), runs the benchmark, prints the
// report on stdout and returns the exit status: 0, or 69 if the idle-connections check
// failed. Backend failures throw Failure with the exit_code_for() their Errc.
int run_bench(const BenchOptions& options);

// Registers `warden bench`.
void add_bench_command(Commands& commands);

}  // namespace warden::cli
