// core/metrics.h — per-group lock metrics (ylock's "events" and "spans") and their
// rendering in the Prometheus text exposition format.
//
// Counted per backend grant, not per reentrant count: a re-acquire that the client
// serves from a hold it already has touches no counter.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace warden::core {

// A fixed-bucket histogram of durations, in seconds.
class Histogram {
 public:
  static constexpr std::array<double, 15> kBounds = {0.0001, 0.0005, 0.001, 0.0025, 0.005,
                                                     0.01,   0.025,  0.05,  0.1,    0.25,
                                                     0.5,    1,      5,     30,     300};
  void observe(std::chrono::nanoseconds d);
  // Appends "<name>_bucket{labels,le=...} n" lines, _sum and _count.
  void render(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::array<std::uint64_t, kBounds.size()> buckets_{};  // non-cumulative
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

enum class Counter {
  attempts,          // backend acquires started
  grants,            // backend grants obtained
  timeouts,          // waits that ran out or were cancelled
  errors,            // acquires that failed with an Error
  releases,          // backend grants released (confirmed)
  release_failures,  // releases the backend did not confirm (retried in background)
  losses,            // leases lost
  renewals,          // successful renewals of one grant
  renewal_failures,  // renewal rounds that failed as a whole (transport), once per group
  cache_hits,        // acquires served from the lock cache, with no I/O
  cache_revokes,     // cached grants the backend asked back
  cache_give_backs,  // cached grants released on the backend (revoked, idle, evicted, closed)
};
inline constexpr std::size_t kCounterCount = 12;

class Metrics {
 public:
  void add(std::string_view group, Counter counter, std::uint64_t n = 1);
  void observe_wait(std::string_view group, std::chrono::nanoseconds d);
  void observe_hold(std::string_view group, std::chrono::nanoseconds d);
  std::uint64_t get(std::string_view group, Counter counter) const;

  // The Prometheus text format (0.0.4): HELP/TYPE lines then one sample per group.
  std::string render() const;

 private:
  struct Group {
    std::array<std::uint64_t, kCounterCount> counters{};
    Histogram wait;
    Histogram hold;
  };
  Group& group_locked(std::string_view group);

  mutable std::mutex mu_;
  std::map<std::string, Group, std::less<>> groups_;  // guarded by mu_
};

// Escapes a Prometheus label value (backslash, double quote, newline).
std::string escape_label_value(std::string_view value);

}  // namespace warden::core
