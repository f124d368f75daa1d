// tests/table/lock_table_query_test.cc — queries, events, time and timer bookkeeping.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "table/lock_table.h"
#include "table_test_util.h"

namespace warden::table {
namespace {

using testing::at;
using testing::Kind;
using testing::LockTableTest;
using testing::R;

// --- queries

TEST_F(LockTableTest, NextWakeupIsTheEarliestExpiryDeadlineOrDelayEnd) {
  EXPECT_EQ(table_.next_wakeup(), std::nullopt);
  Grant g = grant(R::exclusive().ttl(100).lock_delay(50));
  EXPECT_EQ(table_.next_wakeup(), at(100));
  RequestId w = queue(R::exclusive().until(at(80)));
  queue(R::exclusive());  // waits forever: no wake-up of its own
  EXPECT_EQ(table_.next_wakeup(), at(80));
  ASSERT_TRUE(table_.cancel(w, at(1)));
  EXPECT_EQ(table_.next_wakeup(), at(100));
  ASSERT_TRUE(table_.renew("k", g.token, milliseconds(200), at(10)).has_value());
  EXPECT_EQ(table_.next_wakeup(), at(210));
  table_.advance(at(210));  // expires; the forever waiter then waits for the delay
  EXPECT_EQ(table_.next_wakeup(), at(260));
}

TEST_F(LockTableTest, NextWakeupForgetsReleasedLeases) {
  Grant g = grant(R::exclusive().ttl(100));
  Grant h = grant(R::exclusive("b").ttl(300));
  ASSERT_TRUE(table_.release("k", g.token, at(1)));
  EXPECT_EQ(table_.next_wakeup(), at(300));
  ASSERT_TRUE(table_.release("b", h.token, at(1)));
  EXPECT_EQ(table_.next_wakeup(), std::nullopt);
}

TEST_F(LockTableTest, InspectShowsHoldersWaitersAndDelay) {
  EXPECT_TRUE(table_.inspect("k").holders.empty());
  Grant g = grant(R::shared().ttl(100).session(4));
  RequestId w = queue(R::exclusive().until(at(500)).session(9));
  KeyInfo info = table_.inspect("k");
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders[0].id, g.id);
  EXPECT_EQ(info.holders[0].mode, Mode::shared);
  EXPECT_EQ(info.holders[0].token, g.token);
  EXPECT_EQ(info.holders[0].expires, at(100));
  EXPECT_EQ(info.holders[0].session, 4u);
  ASSERT_EQ(info.waiters.size(), 1u);
  EXPECT_EQ(info.waiters[0].id, w);
  EXPECT_EQ(info.waiters[0].mode, Mode::exclusive);
  EXPECT_EQ(info.waiters[0].deadline, at(500));
  EXPECT_EQ(info.waiters[0].session, 9u);
  EXPECT_EQ(info.delayed_until, std::nullopt);
}

TEST_F(LockTableTest, StatsCountKeysHoldersAndWaiters) {
  grant(R::shared("a"));
  grant(R::shared("a"));
  queue(R::exclusive("a"));
  grant(R::exclusive("b"));
  queue(R::exclusive("b"));
  queue(R::shared("b"));
  TableStats s = table_.stats();
  EXPECT_EQ(s.keys, 2u);
  EXPECT_EQ(s.holders, 3u);
  EXPECT_EQ(s.waiters, 3u);
}

TEST_F(LockTableTest, FindAndHoldsDescribeTheGrant) {
  Grant g = grant(R::shared().ttl(100).session(3));
  std::optional<Grant> found = table_.find("k", g.token);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, g.id);
  EXPECT_EQ(found->key, "k");
  EXPECT_EQ(found->mode, Mode::shared);
  EXPECT_EQ(found->token, g.token);
  EXPECT_EQ(found->expires, at(100));
  EXPECT_EQ(found->session, 3u);
  EXPECT_TRUE(table_.holds("k", g.token));
  EXPECT_FALSE(table_.holds("k", g.token + 1));
  EXPECT_FALSE(table_.holds("x", g.token));
  EXPECT_EQ(table_.find("x", g.token), std::nullopt);
}

TEST_F(LockTableTest, TableIsEmptyAfterEverythingIsReleasedExpiredOrCancelled) {
  EXPECT_TRUE(table_.empty());
  Grant released = grant(R::exclusive("a"));
  grant(R::exclusive("b").ttl(100).lock_delay(20));  // will expire
  RequestId cancelled = queue(R::exclusive("a"));
  queue(R::shared("b").until(at(50)));  // will time out
  EXPECT_TRUE(table_.cancel(cancelled, at(1)));
  EXPECT_TRUE(table_.release("a", released.token, at(1)));
  table_.advance(at(100));
  EXPECT_FALSE(table_.empty());  // "b" is under lock-delay
  table_.advance(at(120));
  EXPECT_TRUE(table_.empty());
  EXPECT_EQ(table_.stats().keys, 0u);
  EXPECT_EQ(table_.stats().holders, 0u);
  EXPECT_EQ(table_.stats().waiters, 0u);
  EXPECT_EQ(table_.next_wakeup(), std::nullopt);
}

TEST_F(LockTableTest, TakeEventsDrainsThemInOrder) {
  Grant g = grant(R::exclusive().ttl(100));
  RequestId a = queue(R::exclusive().until(at(50)));
  RequestId b = queue(R::exclusive().ttl(10));
  table_.advance(at(100));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{
                          {Kind::timed_out, a}, {Kind::expired, g.id}, {Kind::granted, b}}));
  EXPECT_TRUE(table_.take_events().empty());
}

// --- time

TEST_F(LockTableTest, TimeGoingBackwardsCountsAsTheLatestTimeSeen) {
  table_.advance(at(100));
  Grant g = grant(R::exclusive().ttl(100), at(50));
  EXPECT_EQ(g.expires, at(200));
  EXPECT_EQ(table_.renew("k", g.token, milliseconds(10), at(0)), at(110));
  // A deadline between the stale `now` and the latest time is already past.
  EXPECT_EQ(acquire(R::exclusive().until(at(80)), at(60)).status, AcquireStatus::busy);
}

TEST_F(LockTableTest, HugeLeasesAndDelaysSaturateInsteadOfWrapping) {
  Grant g = grant(R::exclusive().ttl(milliseconds::max().count()));
  EXPECT_EQ(g.expires, Time::max());
  EXPECT_EQ(table_.next_wakeup(), std::nullopt);
  EXPECT_EQ(table_.renew("k", g.token, milliseconds::max(), at(1)), Time::max());
  table_.advance(at(1'000'000'000));
  EXPECT_TRUE(table_.holds("k", g.token));

  Grant h = grant(R::exclusive("d").ttl(10).lock_delay(milliseconds::max().count()));
  table_.advance(at(1'000'000'010));
  EXPECT_FALSE(table_.holds("d", h.token));
  EXPECT_EQ(table_.inspect("d").delayed_until, Time::max());
}

// A request keeps its ttl and lock-delay in 4 bytes each: every length the protocol can
// carry (a week, an hour) to the millisecond; one beyond 49.7 days counts as forever.
TEST_F(LockTableTest, LeasesAndDelaysUpTo49DaysAreExactAndLongerOnesAreForever) {
  constexpr std::int64_t kWeek = 7LL * 24 * 3600 * 1000;
  grant(R::exclusive("week").ttl(kWeek).lock_delay(3600 * 1000));
  const KeyInfo week = table_.inspect("week");
  ASSERT_EQ(week.holders.size(), 1u);
  EXPECT_EQ(week.holders[0].ttl, milliseconds(kWeek));
  EXPECT_EQ(week.holders[0].lock_delay, milliseconds(3600 * 1000));
  EXPECT_EQ(week.holders[0].expires, at(kWeek));

  Grant longer = grant(R::exclusive("long").ttl(60LL * 24 * 3600 * 1000));
  EXPECT_EQ(longer.expires, Time::max());
  EXPECT_EQ(table_.inspect("long").holders[0].ttl, milliseconds::max());
}

TEST_F(LockTableTest, StaleTimersFromChurnDoNotDisturbLiveOnes) {
  // Many short-held grants with long leases leave stale timers behind; the live lease
  // below must still expire exactly on time and the table must end empty.
  Grant keep = grant(R::exclusive("keep").ttl(5000));
  for (int i = 0; i < 20'000; ++i) {
    std::string key = "churn" + std::to_string(i % 7);
    AcquireResult r = table_.acquire(R::shared(key).ttl(60'000), at(i / 10));
    ASSERT_EQ(r.status, AcquireStatus::granted);
    ASSERT_TRUE(table_.renew(key, r.grant.token, milliseconds(70'000), at(i / 10)));
    ASSERT_TRUE(table_.release(key, r.grant.token, at(i / 10)));
  }
  EXPECT_EQ(table_.next_wakeup(), at(5000));
  table_.advance(at(4999));
  EXPECT_TRUE(table_.holds("keep", keep.token));
  table_.advance(at(5000));
  EXPECT_FALSE(table_.holds("keep", keep.token));
  EXPECT_TRUE(table_.empty());
}

TEST_F(LockTableTest, CompactingStaleTimersKeepsEveryLiveOne) {
  // One live timer of each kind: a lease, a waiter's deadline and a lock-delay's end.
  Grant lease = grant(R::exclusive("lease").ttl(500));
  RequestId waiter = queue(R::exclusive("lease").until(at(300)));
  grant(R::exclusive("delay").ttl(10).lock_delay(1000));
  table_.advance(at(10));
  ASSERT_EQ(table_.inspect("delay").delayed_until, at(1010));
  table_.take_events();

  // Renewals back and forth leave stale and duplicate timers behind, and so does churn
  // on other keys; together they force many compactions.
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(table_.renew("lease", lease.token, milliseconds(480 + i % 3), at(20)));
    Grant g = grant(R::shared("churn" + std::to_string(i % 5)).ttl(900), at(20));
    ASSERT_TRUE(table_.release(g.key, g.token, at(20)));
  }
  ASSERT_EQ(table_.renew("lease", lease.token, milliseconds(480), at(20)), at(500));

  EXPECT_EQ(table_.next_wakeup(), at(300));
  table_.advance(at(299));
  EXPECT_TRUE(events().empty());
  table_.advance(at(300));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::timed_out, waiter}}));
  EXPECT_EQ(table_.next_wakeup(), at(500));
  table_.advance(at(499));
  EXPECT_TRUE(events().empty());
  table_.advance(at(500));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::expired, lease.id}}));
  EXPECT_EQ(table_.next_wakeup(), at(1010));
  table_.advance(at(1009));
  EXPECT_FALSE(table_.empty());
  table_.advance(at(1010));
  EXPECT_TRUE(table_.empty());
  EXPECT_EQ(table_.next_wakeup(), std::nullopt);
}

}  // namespace
}  // namespace warden::table
