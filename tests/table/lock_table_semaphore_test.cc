// tests/table/lock_table_semaphore_test.cc — a key of N permits: requests for k of them
// under the lock's own FIFO, lease and token rules, and a capacity that cannot change
// under its users.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "table/lock_table.h"
#include "table_test_util.h"

namespace warden::table {
namespace {

using testing::at;
using testing::holder_ids;
using testing::Kind;
using testing::LockTableTest;
using testing::R;
using testing::waiter_ids;

using Events = std::vector<std::pair<Kind, RequestId>>;

TEST_F(LockTableTest, SemaphoreGrantsUntilItsPermitsAreTaken) {
  Grant a = grant(R::permits(2, 4));
  Grant b = grant(R::permits(1, 4));
  Grant c = grant(R::permits(1, 4).until(at(0)));
  EXPECT_EQ(a.permits, 2u);
  EXPECT_EQ(a.mode, Mode::shared);
  EXPECT_LT(a.token, b.token);
  EXPECT_LT(b.token, c.token);
  EXPECT_EQ(acquire(R::permits(1, 4).until(at(0))).status, AcquireStatus::busy);

  const KeyInfo info = table_.inspect("k");
  EXPECT_EQ(info.capacity, 4u);
  EXPECT_EQ(holder_ids(info), (std::vector<RequestId>{a.id, b.id, c.id}));
  EXPECT_EQ(info.holders[0].permits, 2u);
  EXPECT_EQ(table_.stats().holders, 3u);
}

TEST_F(LockTableTest, SemaphoreReleaseFreesExactlyTheHoldersPermits) {
  Grant a = grant(R::permits(3, 4));
  RequestId w = queue(R::permits(2, 4));
  Grant b = grant(R::permits(1, 4).non_fair());  // fits beside a: non-fair passes the queue
  ASSERT_TRUE(table_.release("k", b.token, at(1)));
  EXPECT_TRUE(events().empty()) << "3 held + 2 asked > 4";
  ASSERT_TRUE(table_.release("k", a.token, at(2)));
  EXPECT_EQ(events(), (Events{{Kind::granted, w}}));
  EXPECT_FALSE(table_.release("k", a.token, at(3))) << "released once";
}

TEST_F(LockTableTest, SemaphoreServesItsQueueInOrderAndASmallRequestDoesNotPassABigOne) {
  Grant a = grant(R::permits(2, 3));
  RequestId big = queue(R::permits(3, 3));
  RequestId small = queue(R::permits(1, 3));  // 1 free, but big is first
  EXPECT_EQ(waiter_ids(table_.inspect("k")), (std::vector<RequestId>{big, small}));
  EXPECT_EQ(acquire(R::permits(1, 3).until(at(0))).status, AcquireStatus::busy)
      << "a fair try may not pass the queue either";
  ASSERT_TRUE(table_.release("k", a.token, at(1)));
  EXPECT_EQ(events(), (Events{{Kind::granted, big}}));
  EXPECT_EQ(table_.inspect("k").waiters.size(), 1u);
}

TEST_F(LockTableTest, SemaphoreGrantsTheRunOfWaitersThatFit) {
  Grant a = grant(R::permits(4, 4));
  RequestId w1 = queue(R::permits(1, 4));
  RequestId w2 = queue(R::permits(2, 4));
  RequestId w3 = queue(R::permits(2, 4));  // 1 + 2 + 2 > 4: waits for w1 or w2
  ASSERT_TRUE(table_.release("k", a.token, at(1)));
  EXPECT_EQ(events(), (Events{{Kind::granted, w1}, {Kind::granted, w2}}));
  EXPECT_EQ(waiter_ids(table_.inspect("k")), std::vector<RequestId>{w3});
}

TEST_F(LockTableTest, SemaphoreLeaseThatRunsOutFreesItsPermits) {
  Grant a = grant(R::permits(2, 2).ttl(100));
  RequestId w = queue(R::permits(1, 2));
  table_.advance(at(100));
  EXPECT_EQ(events(), (Events{{Kind::expired, a.id}, {Kind::granted, w}}));
  EXPECT_FALSE(table_.renew("k", a.token, milliseconds(100), at(101)));
}

TEST_F(LockTableTest, SemaphoreWithAnotherCapacityIsRefusedAndChangesNothing) {
  Grant a = grant(R::permits(1, 4));
  EXPECT_EQ(acquire(R::permits(1, 5)).status, AcquireStatus::mismatch);
  EXPECT_EQ(acquire(R::exclusive()).status, AcquireStatus::mismatch);
  EXPECT_EQ(acquire(R::shared()).status, AcquireStatus::mismatch);
  const KeyInfo info = table_.inspect("k");
  EXPECT_EQ(holder_ids(info), std::vector<RequestId>{a.id});
  EXPECT_TRUE(info.waiters.empty());
  EXPECT_EQ(info.capacity, 4u);
  EXPECT_TRUE(events().empty());
}

TEST_F(LockTableTest, LockIsNoSemaphore) {
  grant(R::shared());
  EXPECT_EQ(acquire(R::permits(1, 4)).status, AcquireStatus::mismatch);
  EXPECT_EQ(table_.inspect("k").capacity, 0u);
}

TEST_F(LockTableTest, SemaphoreRequestOutsideItsCapacityIsRefused) {
  EXPECT_EQ(acquire(R::permits(0, 4)).status, AcquireStatus::mismatch);
  EXPECT_EQ(acquire(R::permits(5, 4)).status, AcquireStatus::mismatch);
  EXPECT_TRUE(table_.empty()) << "a refused request leaves no key behind";
}

TEST_F(LockTableTest, IdleSemaphoreIsForgottenAndMayComeBackWithAnotherCapacity) {
  Grant a = grant(R::permits(1, 4));
  ASSERT_TRUE(table_.release("k", a.token, at(1)));
  EXPECT_TRUE(table_.empty());
  Grant b = grant(R::permits(1, 2), at(2));
  EXPECT_EQ(table_.inspect("k").capacity, 2u);
  EXPECT_GT(b.token, a.token);
  ASSERT_TRUE(table_.release("k", b.token, at(3)));
  grant(R::exclusive(), at(4));  // and as a lock
  EXPECT_EQ(table_.inspect("k").capacity, 0u);
}

TEST_F(LockTableTest, SemaphoreWaiterThatTimesOutOrIsCancelledLetsTheNextOneIn) {
  Grant a = grant(R::permits(2, 3));
  RequestId big = queue(R::permits(2, 3).until(at(50)));
  RequestId small = queue(R::permits(1, 3));
  table_.advance(at(50));
  EXPECT_EQ(events(), (Events{{Kind::timed_out, big}, {Kind::granted, small}}));
  RequestId again = queue(R::permits(1, 3), at(51));
  ASSERT_TRUE(table_.release("k", a.token, at(52)));
  EXPECT_EQ(events(), (Events{{Kind::granted, again}}));
}

TEST_F(LockTableTest, SemaphoreLockDelayBlocksTheWholeSemaphore) {
  Grant a = grant(R::permits(1, 3).ttl(100).lock_delay(50));
  table_.advance(at(100));
  EXPECT_EQ(events(), (Events{{Kind::expired, a.id}}));
  EXPECT_EQ(acquire(R::permits(1, 3).until(at(120)), at(120)).status, AcquireStatus::busy);
  EXPECT_EQ(table_.inspect("k").capacity, 3u) << "kept while delayed";
  grant(R::permits(3, 3), at(150));
}

TEST_F(LockTableTest, SemaphoreGrantIsRestoredWithinItsCapacityOnly) {
  // Tokens up to 9 were drawn before the restart.
  CountingTokenSource tokens(9);
  LockTable table(&tokens);
  ASSERT_TRUE(table.restore(R::permits(2, 3), 4, at(0)));
  EXPECT_FALSE(table.restore(R::permits(2, 3), 5, at(0))) << "2 + 2 > 3";
  EXPECT_FALSE(table.restore(R::permits(1, 4), 6, at(0))) << "another capacity";
  EXPECT_FALSE(table.restore(R::exclusive(), 7, at(0)));
  const auto g = table.restore(R::permits(1, 3), 8, at(0));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->permits, 1u);
  EXPECT_EQ(table.acquire(R::permits(1, 3).until(at(0)), at(0)).status, AcquireStatus::busy);
}

}  // namespace
}  // namespace warden::table
