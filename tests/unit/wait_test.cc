#include <gtest/gtest.h>

#include "warden/types.h"

namespace warden {
namespace {

using namespace std::chrono_literals;

TEST(Wait, NoneAndNonPositiveDurationsAreTryOnce) {
  EXPECT_EQ(Wait::none().deadline(), Clock::time_point::min());
  EXPECT_EQ(Wait::up_to(0ms).deadline(), Clock::time_point::min());
  EXPECT_EQ(Wait::up_to(-5s).deadline(), Clock::time_point::min());
}

TEST(Wait, UpToIsRelativeToNow) {
  const auto before = Clock::now();
  const auto d = Wait::up_to(2s).deadline();
  EXPECT_GE(d, before + 2s);
  EXPECT_LE(d, Clock::now() + 2s);
}

TEST(Wait, HugeDurationsSaturateToForever) {
  EXPECT_TRUE(Wait::up_to(std::chrono::hours::max()).is_forever());
  EXPECT_TRUE(Wait::forever().is_forever());
  EXPECT_FALSE(Wait::up_to(1h).is_forever());
}

}  // namespace
}  // namespace warden
