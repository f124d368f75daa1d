// Conformance: per-group metrics in the Prometheus text format (DESIGN §2 "Metrics").
// Light on purpose: the metric families are unit-tested with the core; here we check
// that every engine's traffic is counted, per client and per group.
#include <optional>
#include <sstream>
#include <string>

#include "conformance/conformance_suite.h"

namespace warden::conformance {
namespace {

// The value of the sample `metric`{group="<group>"} in `text`; nullopt if absent.
std::optional<double> value_of(const std::string& text, const std::string& metric,
                               const std::string& group) {
  const std::string series = metric + "{group=\"" + group + "\"} ";
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with(series)) return std::stod(line.substr(series.size()));
  }
  return std::nullopt;
}

TEST_P(Conformance, MetricsCountEventsPerGroup) {
  Client a = open_client();
  Client b = open_client();
  for (int i = 0; i < 3; ++i) {
    Lease lease = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
  }
  // Without caching a's releases are on their way (one round trip); with caching, b's
  // request asks a for the lock back first.
  Lease held = b.lock(group(), "x").acquire(Mode::exclusive, Wait::up_to(kPatience));
  ASSERT_TRUE(held);
  EXPECT_FALSE(a.lock(group(), "x").acquire(Mode::exclusive, Wait::up_to(50ms)));

  // Cached, a asked the backend once and served two cycles from its cache; the one
  // grant was released when b asked for it.
  const int backend_grants = caching() ? 1 : 3;
  const std::string text = a.metrics_text();
  EXPECT_EQ(value_of(text, "warden_acquire_attempts_total", group()), backend_grants + 1) << text;
  EXPECT_EQ(value_of(text, "warden_acquire_grants_total", group()), backend_grants) << text;
  EXPECT_EQ(value_of(text, "warden_acquire_timeouts_total", group()), 1) << text;
  EXPECT_EQ(value_of(text, "warden_releases_total", group()), backend_grants) << text;
  EXPECT_EQ(value_of(text, "warden_lease_losses_total", group()), 0) << text;
  EXPECT_EQ(value_of(text, "warden_wait_seconds_count", group()), backend_grants + 1) << text;
  EXPECT_EQ(value_of(text, "warden_hold_seconds_count", group()), backend_grants) << text;
  EXPECT_EQ(value_of(text, "warden_cache_hits_total", group()), caching() ? 2 : 0) << text;
  EXPECT_EQ(value_of(text, "warden_cache_give_backs_total", group()), caching() ? 1 : 0) << text;

  // Each client counts its own traffic, and each group apart.
  const std::string theirs = b.metrics_text();
  EXPECT_EQ(value_of(theirs, "warden_acquire_grants_total", group()), 1) << theirs;
  EXPECT_EQ(value_of(theirs, "warden_releases_total", group()), 0) << theirs;
  const std::string other_group = group().substr(0, 60) + "-o";
  {
    Lease other = a.lock(other_group, "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(other);
  }
  const std::string later = a.metrics_text();
  EXPECT_EQ(value_of(later, "warden_acquire_grants_total", group()), backend_grants) << later;
  EXPECT_EQ(value_of(later, "warden_acquire_grants_total", other_group), 1) << later;
}

}  // namespace
}  // namespace warden::conformance
