// tests/table/lock_table_restore_test.cc — grants and lock-delays carried over a restart:
// restored with their own tokens and a full lease, and refused when they could not have
// been held together.
#include <gtest/gtest.h>

#include <optional>

#include "table/lock_table.h"
#include "table_test_util.h"

namespace warden::table {
namespace {

using testing::at;
using testing::Kind;
using testing::R;
using testing::summary;

// A table whose token source has handed out up to 100 before (an earlier run's).
class LockTableRestoreTest : public ::testing::Test {
 protected:
  CountingTokenSource tokens_{100};
  LockTable table_{&tokens_};
};

TEST_F(LockTableRestoreTest, RestoredGrantKeepsItsTokenAndGetsAFullLeaseFromNow) {
  const auto g = table_.restore(R::exclusive().ttl(500).lock_delay(50), 7, at(1000));
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->token, 7u);
  EXPECT_EQ(g->expires, at(1500));
  EXPECT_EQ(g->lock_delay, milliseconds(50));
  EXPECT_TRUE(table_.holds("k", 7));
  const auto info = table_.inspect("k");
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].ttl, milliseconds(500));
  EXPECT_EQ(info.holders[0].lock_delay, milliseconds(50));
}

TEST_F(LockTableRestoreTest, RestoredGrantIsRenewedReleasedAndExcludesLikeAnyOther) {
  ASSERT_TRUE(table_.restore(R::exclusive().ttl(500), 7, at(0)));
  EXPECT_EQ(table_.acquire(R::exclusive().until(at(0)), at(10)).status, AcquireStatus::busy);
  EXPECT_EQ(table_.renew("k", 7, milliseconds(800), at(100)), at(900));
  // A later grant draws above the source's last token, so tokens keep increasing.
  const auto queued = table_.acquire(R::exclusive(), at(200));
  ASSERT_EQ(queued.status, AcquireStatus::queued);
  ASSERT_TRUE(table_.release("k", 7, at(300)));
  const auto events = table_.take_events();
  ASSERT_EQ(summary(events), (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, queued.id}}));
  EXPECT_EQ(events[0].grant.token, 101u);
}

TEST_F(LockTableRestoreTest, RestoredLeaseThatRunsOutStartsItsLockDelay) {
  ASSERT_TRUE(table_.restore(R::exclusive().ttl(100).lock_delay(200), 7, at(0)));
  table_.advance(at(100));
  EXPECT_EQ(summary(table_.take_events()).at(0).first, Kind::expired);
  EXPECT_EQ(table_.inspect("k").delayed_until, at(300));
}

TEST_F(LockTableRestoreTest, SharedGrantsAreRestoredTogether) {
  ASSERT_TRUE(table_.restore(R::shared(), 3, at(0)));
  ASSERT_TRUE(table_.restore(R::shared(), 5, at(0)));
  EXPECT_EQ(table_.inspect("k").holders.size(), 2u);
}

TEST_F(LockTableRestoreTest, GrantsThatCouldNotHaveBeenHeldTogetherAreRefused) {
  ASSERT_TRUE(table_.restore(R::shared(), 3, at(0)));
  EXPECT_FALSE(table_.restore(R::exclusive(), 4, at(0)));
  EXPECT_FALSE(table_.restore(R::shared(), 3, at(0)));  // the same token twice
  ASSERT_TRUE(table_.restore(R::exclusive("x"), 4, at(0)));
  EXPECT_FALSE(table_.restore(R::shared("x"), 6, at(0)));
  EXPECT_FALSE(table_.restore(R::exclusive("x"), 8, at(0)));
  EXPECT_EQ(table_.inspect("k").holders.size(), 1u);
  EXPECT_EQ(table_.inspect("x").holders.size(), 1u);
}

TEST_F(LockTableRestoreTest, TokensAboveTheSourceOrZeroAndEmptyLeasesAreRefused) {
  EXPECT_FALSE(table_.restore(R::exclusive(), 101, at(0)));
  EXPECT_FALSE(table_.restore(R::exclusive(), 0, at(0)));
  EXPECT_FALSE(table_.restore(R::exclusive().ttl(0), 5, at(0)));
  EXPECT_TRUE(table_.empty());
}

TEST_F(LockTableRestoreTest, RestoredLockDelayBlocksGrantsUntilItEnds) {
  ASSERT_TRUE(table_.restore_delay("k", at(500), at(0)));
  EXPECT_EQ(table_.acquire(R::exclusive().until(at(0)), at(100)).status, AcquireStatus::busy);
  EXPECT_EQ(table_.acquire(R::exclusive().non_fair().until(at(0)), at(100)).status,
            AcquireStatus::busy);
  const auto queued = table_.acquire(R::exclusive(), at(100));
  ASSERT_EQ(queued.status, AcquireStatus::queued);
  table_.advance(at(500));
  EXPECT_EQ(summary(table_.take_events()),
            (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, queued.id}}));
}

TEST_F(LockTableRestoreTest, LockDelayInThePastIsNothing) {
  EXPECT_FALSE(table_.restore_delay("k", at(0), at(0)));
  EXPECT_TRUE(table_.empty());
}

}  // namespace
}  // namespace warden::table
