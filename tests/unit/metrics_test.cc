#include "core/metrics.h"

#include <gtest/gtest.h>

namespace warden::core {
namespace {

using std::chrono::milliseconds;

TEST(Metrics, CountersRenderPerGroup) {
  Metrics m;
  m.add("orders", Counter::grants, 3);
  m.add("billing", Counter::timeouts);
  const std::string text = m.render();
  EXPECT_NE(text.find("# TYPE warden_acquire_grants_total counter"), std::string::npos);
  EXPECT_NE(text.find("warden_acquire_grants_total{group=\"orders\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("warden_acquire_timeouts_total{group=\"billing\"} 1\n"), std::string::npos);
  EXPECT_EQ(m.get("orders", Counter::grants), 3u);
  EXPECT_EQ(m.get("nobody", Counter::grants), 0u);
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  Metrics m;
  m.observe_wait("g", milliseconds(2));    // <= 0.0025
  m.observe_wait("g", milliseconds(200));  // <= 0.25
  m.observe_wait("g", std::chrono::hours(1));  // only +Inf
  const std::string text = m.render();
  EXPECT_NE(text.find("warden_wait_seconds_bucket{group=\"g\",le=\"0.001\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("warden_wait_seconds_bucket{group=\"g\",le=\"0.0025\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("warden_wait_seconds_bucket{group=\"g\",le=\"0.25\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("warden_wait_seconds_bucket{group=\"g\",le=\"+Inf\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("warden_wait_seconds_count{group=\"g\"} 3\n"), std::string::npos);
}

TEST(Metrics, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace warden::core
