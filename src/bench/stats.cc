#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace warden::bench {

std::int64_t percentile(std::span<const std::int64_t> sorted, double q) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // ceil(q * n) - 1, clamped to the valid ranks. The small epsilon keeps q * n that is
  // meant to be whole (0.99 * 100) from rounding up to the next rank.
  const double rank = std::ceil(q * n - 1e-9);
  if (rank <= 1) return sorted.front();
  if (rank >= n) return sorted.back();
  return sorted[static_cast<std::size_t>(rank) - 1];
}

Samples merge(std::vector<Samples>& parts) {
  std::size_t total = 0;
  for (const Samples& part : parts) total += part.size();
  Samples all;
  all.reserve(total);
  for (Samples& part : parts) {
    all.insert(all.end(), part.begin(), part.end());
    Samples().swap(part);
  }
  return all;
}

LatencySummary summarize(Samples& samples) {
  LatencySummary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = samples.size();
  s.min_ns = samples.front();
  s.max_ns = samples.back();
  s.p50_ns = percentile(samples, 0.50);
  s.p99_ns = percentile(samples, 0.99);
  s.p999_ns = percentile(samples, 0.999);
  // Summed in long double: 10^8 samples of 10^6 ns stay far from any overflow.
  const long double sum = std::accumulate(samples.begin(), samples.end(), 0.0L);
  s.mean_ns = static_cast<double>(sum / static_cast<long double>(samples.size()));
  return s;
}

}  // namespace warden::bench
