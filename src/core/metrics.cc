#include "core/metrics.h"

#include <cstdio>

namespace warden::core {
namespace {

struct CounterInfo {
  const char* name;
  const char* help;
};

constexpr std::array<CounterInfo, kCounterCount> kCounters = {{
    {"warden_acquire_attempts_total", "Backend acquires started."},
    {"warden_acquire_grants_total", "Backend grants obtained."},
    {"warden_acquire_timeouts_total", "Acquires whose wait ran out or was cancelled."},
    {"warden_acquire_errors_total", "Acquires that failed with an error."},
    {"warden_releases_total", "Grants released and confirmed by the backend."},
    {"warden_release_failures_total", "Releases the backend did not confirm."},
    {"warden_lease_losses_total", "Leases lost (not renewed in time or dropped)."},
    {"warden_renewals_total", "Successful renewals of one grant."},
    {"warden_renewal_failures_total", "Renewal rounds that failed as a whole, counted once in each group they renewed."},
    {"warden_cache_hits_total", "Acquires served from the lock cache, with no backend call."},
    {"warden_cache_revokes_total", "Cached grants the backend asked back for another client."},
    {"warden_cache_give_backs_total", "Cached grants released on the backend: revoked, idle, evicted or closed."},
}};

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Histogram::observe(std::chrono::nanoseconds d) {
  const double seconds = std::chrono::duration<double>(d).count();
  ++count_;
  sum_ += seconds;
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++buckets_[i];
      return;
    }
  }
}

void Histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  std::uint64_t cumulative = 0;
  const std::string prefix = std::string(name) + "_bucket{" + std::string(labels) + ",le=\"";
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    out += prefix + format_double(kBounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += prefix + "+Inf\"} " + std::to_string(count_) + "\n";
  out += std::string(name) + "_sum{" + std::string(labels) + "} " + format_double(sum_) + "\n";
  out += std::string(name) + "_count{" + std::string(labels) + "} " + std::to_string(count_) +
         "\n";
}

Metrics::Group& Metrics::group_locked(std::string_view group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) it = groups_.emplace(std::string(group), Group{}).first;
  return it->second;
}

void Metrics::add(std::string_view group, Counter counter, std::uint64_t n) {
  std::lock_guard guard(mu_);
  group_locked(group).counters[static_cast<std::size_t>(counter)] += n;
}

void Metrics::observe_wait(std::string_view group, std::chrono::nanoseconds d) {
  std::lock_guard guard(mu_);
  group_locked(group).wait.observe(d);
}

void Metrics::observe_hold(std::string_view group, std::chrono::nanoseconds d) {
  std::lock_guard guard(mu_);
  group_locked(group).hold.observe(d);
}

std::uint64_t Metrics::get(std::string_view group, Counter counter) const {
  std::lock_guard guard(mu_);
  auto it = groups_.find(group);
  return it == groups_.end() ? 0 : it->second.counters[static_cast<std::size_t>(counter)];
}

std::string Metrics::render() const {
  std::lock_guard guard(mu_);
  std::string out;
  for (std::size_t c = 0; c < kCounterCount; ++c) {
    out += std::string("# HELP ") + kCounters[c].name + " " + kCounters[c].help + "\n";
    out += std::string("# TYPE ") + kCounters[c].name + " counter\n";
    for (const auto& [group, g] : groups_) {
      out += std::string(kCounters[c].name) + "{group=\"" + escape_label_value(group) + "\"} " +
             std::to_string(g.counters[c]) + "\n";
    }
  }
  const std::pair<const char*, const char*> histograms[] = {
      {"warden_wait_seconds", "Time from acquire to grant (or give-up)."},
      {"warden_hold_seconds", "Time from grant to release or loss."}};
  for (const auto& [name, help] : histograms) {
    out += std::string("# HELP ") + name + " " + help + "\n";
    out += std::string("# TYPE ") + name + " histogram\n";
    for (const auto& [group, g] : groups_) {
      const std::string labels = "group=\"" + escape_label_value(group) + "\"";
      (std::string_view(name) == "warden_wait_seconds" ? g.wait : g.hold)
          .render(out, name, labels);
    }
  }
  return out;
}

}  // namespace warden::core
