// tests/table/lock_table_value_test.cc — values carried by requests (an election's
// candidates): kept while the request waits and while its grant is held, replaced by
// set_value, and gone with the request however it ends.
#include <gtest/gtest.h>

#include <string>

#include "table/lock_table.h"
#include "table_test_util.h"

namespace warden::table {
namespace {

using testing::at;
using testing::LockTableTest;
using testing::R;

std::string leader_value(const LockTable& table, std::string_view key = "k") {
  const KeyInfo info = table.inspect(key);
  return info.holders.empty() ? "<none>" : info.holders.front().value;
}

TEST_F(LockTableTest, AGrantCarriesItsRequestsValueAndSetValueReplacesIt) {
  const AcquireResult a = table_.acquire(R::exclusive().ttl(100).value("node-a"), at(0));
  ASSERT_EQ(a.status, AcquireStatus::granted);
  EXPECT_EQ(leader_value(table_), "node-a");
  EXPECT_TRUE(table_.set_value("k", a.grant.token, "node-a:8080"));
  EXPECT_EQ(leader_value(table_), "node-a:8080");
  EXPECT_FALSE(table_.set_value("k", a.grant.token + 1, "impostor")) << "no such grant";
  EXPECT_FALSE(table_.set_value("other", a.grant.token, "impostor"));
  EXPECT_EQ(leader_value(table_), "node-a:8080");
  EXPECT_TRUE(table_.set_value("k", a.grant.token, ""));
  EXPECT_EQ(leader_value(table_), "");
}

TEST_F(LockTableTest, AWaitersValueIsHeldUntilItIsGranted) {
  const AcquireResult a = table_.acquire(R::exclusive().ttl(100).value("a"), at(0));
  const AcquireResult b = table_.acquire(R::exclusive().ttl(100).value("b").until(at(500)), at(1));
  ASSERT_EQ(b.status, AcquireStatus::queued);
  EXPECT_EQ(leader_value(table_), "a");
  EXPECT_TRUE(table_.release("k", a.grant.token, at(2)));
  EXPECT_EQ(leader_value(table_), "b") << "the waiter's value came with its grant";
}

TEST_F(LockTableTest, AValueGoesWithItsRequestHoweverItEnds) {
  // Released, expired, timed out, cancelled, cancelled with its session: a later
  // request without a value never shows an earlier one's.
  const AcquireResult held = table_.acquire(R::exclusive().ttl(100).value("released"), at(0));
  const AcquireResult timed = table_.acquire(R::exclusive().value("timed").until(at(10)), at(0));
  const AcquireResult cancelled = table_.acquire(R::exclusive().value("cancelled"), at(0));
  table_.acquire(R::exclusive().value("session").session(7), at(0));
  table_.advance(at(20));
  EXPECT_TRUE(table_.cancel(cancelled.id, at(21)));
  EXPECT_EQ(table_.cancel_session(7, at(22)), 1u);
  EXPECT_TRUE(table_.release("k", held.grant.token, at(23)));
  ASSERT_NE(timed.id, 0u);
  EXPECT_TRUE(table_.empty());

  const AcquireResult expiring = table_.acquire(R::exclusive().ttl(50).value("expired"), at(30));
  table_.advance(at(100));
  EXPECT_FALSE(table_.holds("k", expiring.grant.token));
  const AcquireResult plain = table_.acquire(R::exclusive().ttl(100), at(101));
  ASSERT_EQ(plain.status, AcquireStatus::granted);
  EXPECT_EQ(leader_value(table_), "");
  EXPECT_TRUE(table_.release("k", plain.grant.token, at(102)));
  EXPECT_TRUE(table_.empty());
}

TEST_F(LockTableTest, ARestoredGrantKeepsItsValue) {
  CountingTokenSource tokens(5);  // a restart: tokens up to 5 were drawn before
  LockTable fresh(&tokens);
  ASSERT_TRUE(fresh.restore(R::exclusive().ttl(100).value("kept"), 5, at(0)));
  EXPECT_EQ(leader_value(fresh), "kept");
}

}  // namespace
}  // namespace warden::table
