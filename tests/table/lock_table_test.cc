// tests/table/lock_table_test.cc — modes, fairness and waiting: the rules, one test each.
#include "table/lock_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "table_test_util.h"

namespace warden::table {
namespace {

using testing::at;
using testing::holder_ids;
using testing::Kind;
using testing::LockTableTest;
using testing::R;
using testing::summary;
using testing::waiter_ids;

// --- modes

TEST_F(LockTableTest, ExclusiveGrantExcludesEveryoneElse) {
  Grant g = grant(R::exclusive());
  EXPECT_EQ(g.key, "k");
  EXPECT_EQ(g.mode, Mode::exclusive);
  EXPECT_EQ(g.expires, at(30'000));  // the default ttl

  EXPECT_EQ(acquire(R::exclusive().until(at(0))).status, AcquireStatus::busy);
  EXPECT_EQ(acquire(R::shared().until(at(0))).status, AcquireStatus::busy);
  EXPECT_EQ(acquire(R::shared().non_fair().until(at(0))).status, AcquireStatus::busy);
  EXPECT_EQ(acquire(R::exclusive().non_fair().until(at(0))).status, AcquireStatus::busy);
  queue(R::exclusive());
  queue(R::shared());
  EXPECT_EQ(holder_ids(table_.inspect("k")), std::vector<RequestId>{g.id});
}

TEST_F(LockTableTest, SharedGrantsAreHeldTogether) {
  Grant a = grant(R::shared());
  Grant b = grant(R::shared());
  Grant c = grant(R::shared().until(at(0)));
  EXPECT_EQ(holder_ids(table_.inspect("k")), (std::vector<RequestId>{a.id, b.id, c.id}));
  EXPECT_EQ(acquire(R::exclusive().until(at(0))).status, AcquireStatus::busy);
}

TEST_F(LockTableTest, ExclusiveWaiterIsGrantedOnlyWhenTheLastSharedHolderLeaves) {
  Grant a = grant(R::shared());
  Grant b = grant(R::shared());
  RequestId w = queue(R::exclusive());
  ASSERT_TRUE(table_.release("k", a.token, at(1)));
  EXPECT_TRUE(events().empty());
  ASSERT_TRUE(table_.release("k", b.token, at(2)));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, w}}));
}

TEST_F(LockTableTest, DifferentKeysDoNotInterfere) {
  grant(R::exclusive("a"));
  grant(R::exclusive("b"));
  EXPECT_EQ(table_.stats().keys, 2u);
}

// --- fairness

TEST_F(LockTableTest, FairWaitersAreGrantedInFifoOrder) {
  Grant g = grant(R::exclusive());
  RequestId w1 = queue(R::exclusive());
  RequestId w2 = queue(R::exclusive());
  RequestId w3 = queue(R::exclusive());
  EXPECT_EQ(waiter_ids(table_.inspect("k")), (std::vector<RequestId>{w1, w2, w3}));

  std::uint64_t token = g.token;
  for (RequestId expected : {w1, w2, w3}) {
    ASSERT_TRUE(table_.release("k", token, at(1)));
    std::vector<Event> ev = table_.take_events();
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].kind, Kind::granted);
    EXPECT_EQ(ev[0].grant.id, expected);
    token = ev[0].grant.token;
  }
}

TEST_F(LockTableTest, SharedRunAtTheHeadIsGrantedTogether) {
  Grant x = grant(R::exclusive());
  RequestId s1 = queue(R::shared());
  RequestId s2 = queue(R::shared());
  RequestId x2 = queue(R::exclusive());
  RequestId s3 = queue(R::shared());

  ASSERT_TRUE(table_.release("k", x.token, at(1)));
  std::vector<Event> ev = table_.take_events();
  ASSERT_EQ(summary(ev),
            (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, s1}, {Kind::granted, s2}}));
  EXPECT_EQ(waiter_ids(table_.inspect("k")), (std::vector<RequestId>{x2, s3}));

  ASSERT_TRUE(table_.release("k", ev[0].grant.token, at(2)));
  EXPECT_TRUE(events().empty());  // x2 waits for the whole run to leave
  ASSERT_TRUE(table_.release("k", ev[1].grant.token, at(3)));
  ev = table_.take_events();
  ASSERT_EQ(summary(ev), (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, x2}}));
  ASSERT_TRUE(table_.release("k", ev[0].grant.token, at(4)));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, s3}}));
}

TEST_F(LockTableTest, SharedRequestQueuesBehindWaitingExclusive) {
  grant(R::shared());
  RequestId x = queue(R::exclusive());
  RequestId s = queue(R::shared());  // compatible with the holder, but a writer waits
  EXPECT_EQ(acquire(R::shared().until(at(0))).status, AcquireStatus::busy);
  EXPECT_EQ(waiter_ids(table_.inspect("k")), (std::vector<RequestId>{x, s}));
}

TEST_F(LockTableTest, NonFairRequestBargesPastTheQueueWhenCompatible) {
  Grant s1 = grant(R::shared());
  RequestId x = queue(R::exclusive());
  Grant s2 = grant(R::shared().non_fair());
  Grant s3 = grant(R::shared().non_fair().until(at(0)));
  EXPECT_EQ(holder_ids(table_.inspect("k")), (std::vector<RequestId>{s1.id, s2.id, s3.id}));
  EXPECT_EQ(waiter_ids(table_.inspect("k")), std::vector<RequestId>{x});
}

TEST_F(LockTableTest, IncompatibleNonFairRequestQueuesAtTheTail) {
  Grant g = grant(R::exclusive());
  RequestId fair = queue(R::exclusive());
  RequestId barger = queue(R::exclusive().non_fair());
  EXPECT_EQ(acquire(R::exclusive().non_fair().until(at(0))).status, AcquireStatus::busy);
  EXPECT_EQ(waiter_ids(table_.inspect("k")), (std::vector<RequestId>{fair, barger}));
  ASSERT_TRUE(table_.release("k", g.token, at(1)));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, fair}}));
}

// --- waiting: try, deadlines, cancel

TEST_F(LockTableTest, TryOnceIsBusyAndLeavesNoTrace) {
  Grant g = grant(R::exclusive());
  AcquireResult now = acquire(R::exclusive().until(at(0)), at(0));  // deadline == now
  AcquireResult past = acquire(R::shared().until(Time::min()), at(0));
  EXPECT_EQ(now.status, AcquireStatus::busy);
  EXPECT_EQ(past.status, AcquireStatus::busy);
  EXPECT_TRUE(table_.inspect("k").waiters.empty());
  EXPECT_EQ(table_.stats().waiters, 0u);
  EXPECT_TRUE(events().empty());
  ASSERT_TRUE(table_.release("k", g.token, at(1)));
  EXPECT_TRUE(events().empty());
  EXPECT_TRUE(table_.empty());
  // On a free key a try is simply granted.
  EXPECT_EQ(acquire(R::exclusive().until(at(1)), at(1)).status, AcquireStatus::granted);
}

TEST_F(LockTableTest, WaiterTimesOutAtItsDeadline) {
  Grant g = grant(R::exclusive());
  RequestId w = queue(R::shared().until(at(100)).session(7));
  table_.advance(at(99));
  EXPECT_TRUE(events().empty());
  table_.advance(at(100));
  std::vector<Event> ev = table_.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::timed_out);
  EXPECT_EQ(ev[0].grant.id, w);
  EXPECT_EQ(ev[0].grant.key, "k");
  EXPECT_EQ(ev[0].grant.mode, Mode::shared);
  EXPECT_EQ(ev[0].grant.session, 7u);
  EXPECT_TRUE(table_.inspect("k").waiters.empty());
  EXPECT_FALSE(table_.cancel(w, at(101)));

  ASSERT_TRUE(table_.release("k", g.token, at(102)));
  EXPECT_TRUE(events().empty());  // the timed-out waiter is never granted
  EXPECT_TRUE(table_.empty());
}

TEST_F(LockTableTest, TimedOutExclusiveWaiterLetsSharedWaitersBehindItProceed) {
  grant(R::shared());
  RequestId x = queue(R::exclusive().until(at(100)));
  RequestId s = queue(R::shared());
  table_.advance(at(150));
  EXPECT_EQ(events(),
            (std::vector<std::pair<Kind, RequestId>>{{Kind::timed_out, x}, {Kind::granted, s}}));
}

TEST_F(LockTableTest, CancelRemovesTheWaiterWithoutTraceAndLetsTheQueueProceed) {
  Grant holder = grant(R::shared());
  RequestId x = queue(R::exclusive().until(at(500)));
  RequestId s = queue(R::shared());
  EXPECT_TRUE(table_.cancel(x, at(1)));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, s}}));
  EXPECT_FALSE(table_.cancel(x, at(2)));  // already gone
  EXPECT_FALSE(table_.cancel(s, at(2)));  // granted, not waiting
  EXPECT_FALSE(table_.cancel(12345, at(2)));
  EXPECT_TRUE(table_.inspect("k").waiters.empty());

  // Its deadline passing later does nothing either.
  table_.advance(at(600));
  EXPECT_TRUE(events().empty());
  EXPECT_TRUE(table_.holds("k", holder.token));
}

TEST_F(LockTableTest, CancellingTheOnlyWaiterOfADelayedKeyKeepsOnlyTheDelay) {
  grant(R::exclusive().ttl(100).lock_delay(50));
  RequestId w = queue(R::exclusive());
  table_.advance(at(100));  // expires; the lock-delay runs until 150
  table_.take_events();
  EXPECT_TRUE(table_.cancel(w, at(110)));
  EXPECT_FALSE(table_.empty());
  table_.advance(at(150));
  EXPECT_TRUE(table_.empty());
}

TEST_F(LockTableTest, CancelSessionCancelsOnlyThatSessionsWaiters) {
  Grant held = grant(R::exclusive("a").session(1));
  Grant b = grant(R::shared("b").session(3));
  RequestId bx = queue(R::exclusive("b").session(1));
  RequestId bs = queue(R::shared("b").session(2));
  grant(R::exclusive("c").session(3));
  queue(R::exclusive("c").session(1));
  RequestId c2 = queue(R::exclusive("c").session(2));

  EXPECT_EQ(table_.cancel_session(1, at(1)), 2u);
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, bs}}));
  EXPECT_TRUE(table_.holds("a", held.token));  // holders are untouched
  EXPECT_TRUE(table_.holds("b", b.token));
  EXPECT_EQ(waiter_ids(table_.inspect("c")), std::vector<RequestId>{c2});
  EXPECT_FALSE(table_.cancel(bx, at(2)));
  EXPECT_EQ(table_.cancel_session(1, at(2)), 0u);
}

}  // namespace
}  // namespace warden::table
