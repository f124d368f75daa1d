// tests/table/lock_table_set_test.cc — set requests (a multi-lock granted in one step):
// all members or none, waiting in every member's queue without holding anything.
#include <gtest/gtest.h>

#include <string>
#include <utility>
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

SetRequest set_of(std::vector<std::string> keys, Time deadline = Time::max(),
                  Mode mode = Mode::exclusive) {
  SetRequest r;
  for (auto& key : keys) r.members.push_back({std::move(key), mode});
  r.deadline = deadline;
  return r;
}

TEST_F(LockTableTest, SetOfFreeKeysIsGrantedAtOnceWithATokenPerMember) {
  const SetAcquireResult r = table_.acquire_set(set_of({"a", "b", "c"}), at(0));
  ASSERT_EQ(r.status, AcquireStatus::granted);
  ASSERT_EQ(r.grants.size(), 3u);
  EXPECT_EQ(r.grants[0].key, "a");
  EXPECT_EQ(r.grants[2].key, "c");
  EXPECT_LT(r.grants[0].token, r.grants[1].token);
  EXPECT_LT(r.grants[1].token, r.grants[2].token);
  EXPECT_NE(r.grants[0].id, r.grants[1].id);
  EXPECT_NE(r.grants[0].id, r.id);
  for (const Grant& g : r.grants) EXPECT_TRUE(table_.holds(g.key, g.token));
  EXPECT_EQ(table_.stats().holders, 3u);
  // Each member is an ordinary grant: released on its own.
  EXPECT_TRUE(table_.release("b", r.grants[1].token, at(1)));
  EXPECT_TRUE(table_.holds("a", r.grants[0].token));
}

TEST_F(LockTableTest, WaitingSetHoldsNothingAndIsGrantedWhenItsLastMemberFrees) {
  Grant b = grant(R::exclusive("b"));
  const SetAcquireResult s = table_.acquire_set(set_of({"a", "b"}), at(0));
  ASSERT_EQ(s.status, AcquireStatus::queued);
  EXPECT_TRUE(table_.inspect("a").holders.empty()) << "a waiting set holds nothing";
  EXPECT_EQ(waiter_ids(table_.inspect("a")), (std::vector<RequestId>{s.id}));
  EXPECT_EQ(waiter_ids(table_.inspect("b")), (std::vector<RequestId>{s.id}));
  EXPECT_EQ(table_.stats().waiters, 1u) << "one request";

  ASSERT_TRUE(table_.release("b", b.token, at(1)));
  const auto events = table_.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::set_granted);
  ASSERT_EQ(events[0].grants.size(), 2u);
  EXPECT_EQ(events[0].grants[0].key, "a");
  EXPECT_EQ(events[0].grants[1].key, "b");
  EXPECT_EQ(events[0].grant.id, s.id) << "the event names the set request";
  EXPECT_NE(events[0].grants[0].id, events[0].grants[1].id) << "each grant its own id";
  EXPECT_GT(events[0].grants[0].token, b.token);
  EXPECT_EQ(table_.stats().waiters, 0u);
}

TEST_F(LockTableTest, WaitingSetKeepsItsPlaceInEveryQueue) {
  Grant b = grant(R::exclusive("b"));
  const SetAcquireResult s = table_.acquire_set(set_of({"a", "b"}), at(0));
  ASSERT_EQ(s.status, AcquireStatus::queued);
  // A fair request for a queues behind the set, though a itself is free.
  RequestId behind = queue(R::exclusive("a"));
  ASSERT_TRUE(table_.release("b", b.token, at(1)));
  EXPECT_EQ(testing::summary(table_.take_events()), (Events{{Kind::set_granted, s.id}}));
  // A non-fair request passes queues, as for locks.
  EXPECT_EQ(table_.acquire(R::exclusive("c").non_fair(), at(2)).status, AcquireStatus::granted);
  EXPECT_EQ(waiter_ids(table_.inspect("a")), (std::vector<RequestId>{behind}));
}

TEST_F(LockTableTest, SetsOverlappingInOppositeOrdersAreServedInArrivalOrder) {
  Grant a = grant(R::exclusive("a"));
  const SetAcquireResult ab = table_.acquire_set(set_of({"a", "b"}), at(0));
  const SetAcquireResult ba = table_.acquire_set(set_of({"b", "a"}), at(0));
  ASSERT_EQ(ab.status, AcquireStatus::queued);
  ASSERT_EQ(ba.status, AcquireStatus::queued);
  ASSERT_TRUE(table_.release("a", a.token, at(1)));
  const auto first = table_.take_events();
  ASSERT_EQ(testing::summary(first), (Events{{Kind::set_granted, ab.id}}));
  ASSERT_TRUE(table_.release("a", first[0].grants[0].token, at(2)));
  EXPECT_TRUE(table_.take_events().empty()) << "ba still needs b";
  ASSERT_TRUE(table_.release("b", first[0].grants[1].token, at(3)));
  EXPECT_EQ(testing::summary(table_.take_events()), (Events{{Kind::set_granted, ba.id}}));
}

TEST_F(LockTableTest, SharedSetJoinsSharedHoldersAndGrantingItServesTheQueuesBehind) {
  Grant s1 = grant(R::shared("a"));
  const SetAcquireResult s =
      table_.acquire_set(set_of({"a", "b"}, Time::max(), Mode::shared), at(0));
  ASSERT_EQ(s.status, AcquireStatus::granted) << "shared beside shared, no queues";
  EXPECT_EQ(holder_ids(table_.inspect("a")).size(), 2u);

  Grant x = grant(R::exclusive("c"));
  const SetAcquireResult t =
      table_.acquire_set(set_of({"c", "d"}, Time::max(), Mode::shared), at(0));
  ASSERT_EQ(t.status, AcquireStatus::queued);
  RequestId d_reader = queue(R::shared("d").until(at(100)));  // behind the set in d
  ASSERT_TRUE(table_.release("c", x.token, at(1)));
  EXPECT_EQ(testing::summary(table_.take_events()),
            (Events{{Kind::set_granted, t.id}, {Kind::granted, d_reader}}))
      << "the shared run behind the set in d follows it";
  (void)s1;
}

TEST_F(LockTableTest, SetDeadlineRemovesItFromEveryQueue) {
  Grant b = grant(R::exclusive("b"));
  const SetAcquireResult s = table_.acquire_set(set_of({"a", "b"}, at(50)), at(0));
  ASSERT_EQ(s.status, AcquireStatus::queued);
  RequestId behind = queue(R::exclusive("a").until(at(100)));
  table_.advance(at(50));
  EXPECT_EQ(testing::summary(table_.take_events()),
            (Events{{Kind::timed_out, s.id}, {Kind::granted, behind}}))
      << "a's queue moves on once the set is gone";
  EXPECT_TRUE(table_.inspect("b").waiters.empty());
  EXPECT_EQ(table_.stats().waiters, 0u);
  (void)b;
}

TEST_F(LockTableTest, CancelledSetLeavesNoTrace) {
  Grant b = grant(R::exclusive("b"));
  const SetAcquireResult s = table_.acquire_set(set_of({"a", "b", "c"}), at(0));
  ASSERT_EQ(s.status, AcquireStatus::queued);
  EXPECT_TRUE(table_.cancel(s.id, at(1)));
  EXPECT_FALSE(table_.cancel(s.id, at(1)));
  EXPECT_TRUE(table_.take_events().empty());
  EXPECT_EQ(table_.stats().keys, 1u) << "a and c are forgotten";
  ASSERT_TRUE(table_.release("b", b.token, at(2)));
  EXPECT_TRUE(table_.empty());
}

TEST_F(LockTableTest, SessionCancelRemovesItsSetsOnce) {
  Grant b = grant(R::exclusive("b"));
  SetRequest r = set_of({"a", "b"});
  r.session = 7;
  ASSERT_EQ(table_.acquire_set(r, at(0)).status, AcquireStatus::queued);
  RequestId other = queue(R::exclusive("b").session(8));
  EXPECT_EQ(table_.cancel_session(7, at(1)), 1u);
  EXPECT_EQ(waiter_ids(table_.inspect("b")), (std::vector<RequestId>{other}));
  EXPECT_TRUE(table_.inspect("a").waiters.empty());
  (void)b;
}

TEST_F(LockTableTest, SetTriesOnceWithoutAWaitAndChangesNothingWhenBusy) {
  Grant b = grant(R::exclusive("b"));
  EXPECT_EQ(table_.acquire_set(set_of({"a", "b"}, at(0)), at(0)).status, AcquireStatus::busy);
  EXPECT_EQ(table_.stats().keys, 1u);
  (void)b;
}

TEST_F(LockTableTest, LockDelayOnAMemberHoldsTheWholeSet) {
  grant(R::exclusive("b").ttl(10).lock_delay(100));
  const SetAcquireResult s = table_.acquire_set(set_of({"a", "b"}), at(0));
  ASSERT_EQ(s.status, AcquireStatus::queued);
  table_.advance(at(50));  // b's lease expired at 10; its delay runs to 110
  EXPECT_EQ(testing::summary(table_.take_events()).size(), 1u) << "only the expiry";
  table_.advance(at(110));
  EXPECT_EQ(testing::summary(table_.take_events()), (Events{{Kind::set_granted, s.id}}));
}

TEST_F(LockTableTest, BadSetsAreMismatchesAndChangeNothing) {
  EXPECT_EQ(table_.acquire_set(SetRequest{}, at(0)).status, AcquireStatus::mismatch);
  EXPECT_EQ(table_.acquire_set(set_of({"a", "a"}), at(0)).status, AcquireStatus::mismatch);
  grant(R::permits(1, 2, "sem"));
  EXPECT_EQ(table_.acquire_set(set_of({"a", "sem"}), at(0)).status, AcquireStatus::mismatch);
  EXPECT_EQ(table_.stats().keys, 1u);
}

}  // namespace
}  // namespace warden::table
