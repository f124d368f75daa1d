// Redlock's arithmetic (engines/redlock/quorum.h): quorums, drift, validity, how votes
// decide, and the token drawn from a quorum's reads.
#include "engines/redlock/quorum.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace warden::engines::redlock {
namespace {

using namespace std::chrono_literals;

TEST(RedlockQuorum, IsAStrictMajority) {
  EXPECT_EQ(quorum(1), 1u);
  EXPECT_EQ(quorum(2), 2u);
  EXPECT_EQ(quorum(3), 2u);
  EXPECT_EQ(quorum(4), 3u);
  EXPECT_EQ(quorum(5), 3u);
  EXPECT_EQ(quorum(16), 9u);
}

TEST(RedlockQuorum, DriftIsOnePercentPlusTwoMilliseconds) {
  EXPECT_EQ(clock_drift(30'000ms), 302ms);
  EXPECT_EQ(clock_drift(10ms), 2ms);
}

TEST(RedlockQuorum, RoundTimeoutStaysFarBelowTheLease) {
  EXPECT_EQ(round_timeout(100ms, 30'000ms), 100ms);
  EXPECT_EQ(round_timeout(100ms, 500ms), 50ms);
  EXPECT_EQ(round_timeout(100ms, 10ms), 1ms);
}

TEST(RedlockQuorum, ValidityIsTtlLessElapsedLessDrift) {
  EXPECT_EQ(validity(10'000ms, 100ms), 10'000ms - 100ms - 102ms);
  EXPECT_LE(validity(100ms, 97ms), Clock::duration::zero());
}

TEST(RedlockQuorum, AcquireVerdicts) {
  EXPECT_EQ(judge_acquire({3, 0, 2}, 5), AcquireVerdict::granted);
  EXPECT_EQ(judge_acquire({0, 3, 2}, 5), AcquireVerdict::held);
  EXPECT_EQ(judge_acquire({2, 2, 1}, 5), AcquireVerdict::split);
  EXPECT_EQ(judge_acquire({1, 1, 3}, 5), AcquireVerdict::unreachable);
  EXPECT_EQ(judge_acquire({2, 0, 3}, 5), AcquireVerdict::unreachable);
  EXPECT_EQ(judge_acquire({1, 0, 0}, 1), AcquireVerdict::granted);
}

TEST(RedlockQuorum, RenewalIsLostOnlyWhenAQuorumCanNoLongerAgree) {
  EXPECT_EQ(judge_renew({3, 2, 0}, 5), RenewVerdict::renewed);
  EXPECT_EQ(judge_renew({2, 3, 0}, 5), RenewVerdict::lost);
  // Two masters said no, one did not answer: the silent one could still make three.
  EXPECT_EQ(judge_renew({2, 2, 1}, 5), RenewVerdict::undecided);
  EXPECT_EQ(judge_renew({0, 0, 5}, 5), RenewVerdict::undecided);
}

TEST(RedlockQuorum, TokenExceedsEveryLastTokenAndClockRead) {
  const std::vector<TokenRead> reads{{41, 7}, {12, 3}, {0, 40}};
  EXPECT_EQ(next_token(reads), 42u);
  const std::vector<TokenRead> clock_ahead{{41, 1'000'000}, {41, 5}};
  EXPECT_EQ(next_token(clock_ahead), 1'000'001u);
}

// Two successive grants' quorums of five share a master; whichever quorum the later
// grant read, it saw the earlier token there and goes above it.
TEST(RedlockQuorum, AnyTwoQuorumsOfFiveIntersect) {
  for (unsigned a = 0; a < 32; ++a) {
    for (unsigned b = 0; b < 32; ++b) {
      if (__builtin_popcount(a) < 3 || __builtin_popcount(b) < 3) continue;
      EXPECT_NE(a & b, 0u) << a << " " << b;
    }
  }
}

}  // namespace
}  // namespace warden::engines::redlock
