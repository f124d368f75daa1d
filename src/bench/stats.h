// bench/stats.h — latency statistics of `warden bench`.
//
// Every sample is recorded (no histogram buckets, no sampling): each client thread
// appends to its own vector, the vectors are merged after the run, sorted once, and
// percentiles are read off the sorted samples by the nearest-rank method:
//
//   percentile(q) = sorted[ceil(q * n) - 1]      (q in (0, 1], n samples)
//
// so p50 of {1..100} is 50, p99 is 99 and p99.9 is 100; every reported figure is a
// latency that was actually measured.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace warden::bench {

// Latencies in nanoseconds on the steady clock.
using Samples = std::vector<std::int64_t>;

// The nearest-rank percentile `q` (0 < q <= 1) of `sorted` (ascending). 0 for no
// samples; q <= 0 gives the smallest sample, q >= 1 the largest.
std::int64_t percentile(std::span<const std::int64_t> sorted, double q);

// Concatenates per-thread sample vectors (moved from) into one.
Samples merge(std::vector<Samples>& parts);

struct LatencySummary {
  std::size_t count = 0;  // samples
  std::int64_t min_ns = 0;
  std::int64_t p50_ns = 0;
  std::int64_t p99_ns = 0;
  std::int64_t p999_ns = 0;
  std::int64_t max_ns = 0;
  double mean_ns = 0;
};

// Sorts `samples` in place and summarises them; all zero for no samples.
LatencySummary summarize(Samples& samples);

// Seconds on the steady clock from `start` to now.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Nanoseconds as microseconds (for reports).
inline double to_us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace warden::bench
