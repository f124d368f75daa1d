// tests/table/lock_table_lease_test.cc — leases, lock-delay and fencing tokens.
#include <gtest/gtest.h>

#include <stdexcept>
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
using testing::waiter_ids;

// --- leases

TEST_F(LockTableTest, RenewExtendsTheLeaseFromNow) {
  Grant g = grant(R::exclusive().ttl(100));
  EXPECT_EQ(table_.renew("k", g.token, milliseconds(100), at(50)), at(150));
  EXPECT_EQ(table_.find("k", g.token)->expires, at(150));
  table_.advance(at(149));
  EXPECT_TRUE(table_.holds("k", g.token));
  EXPECT_TRUE(events().empty());
  table_.advance(at(150));
  EXPECT_FALSE(table_.holds("k", g.token));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::expired, g.id}}));
}

TEST_F(LockTableTest, RenewMayShortenTheLease) {
  Grant g = grant(R::exclusive().ttl(1000));
  EXPECT_EQ(table_.renew("k", g.token, milliseconds(10), at(0)), at(10));
  EXPECT_EQ(table_.next_wakeup(), at(10));
  table_.advance(at(10));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::expired, g.id}}));
  EXPECT_TRUE(table_.empty());
}

TEST_F(LockTableTest, RenewRefusesWhatIsNotHeld) {
  Grant g = grant(R::exclusive().ttl(100));
  grant(R::exclusive("other"));
  EXPECT_EQ(table_.renew("k", g.token + 100, milliseconds(100), at(1)), std::nullopt);
  EXPECT_EQ(table_.renew("other", g.token, milliseconds(100), at(1)), std::nullopt);
  EXPECT_EQ(table_.renew("nope", g.token, milliseconds(100), at(1)), std::nullopt);
  EXPECT_EQ(table_.renew("k", g.token, milliseconds(100), at(100)), std::nullopt);  // expired
  Grant h = grant(R::exclusive().ttl(100), at(100));
  ASSERT_TRUE(table_.release("k", h.token, at(101)));
  EXPECT_EQ(table_.renew("k", h.token, milliseconds(100), at(101)), std::nullopt);  // released
}

TEST_F(LockTableTest, ReleaseRefusesWrongTokenOrKeyAndIsNotRepeated) {
  Grant g = grant(R::exclusive());
  Grant other = grant(R::exclusive("other"));
  EXPECT_FALSE(table_.release("k", other.token, at(1)));
  EXPECT_FALSE(table_.release("other", g.token, at(1)));
  EXPECT_FALSE(table_.release("k", 0, at(1)));
  EXPECT_TRUE(table_.holds("k", g.token));
  EXPECT_TRUE(table_.release("k", g.token, at(1)));
  EXPECT_FALSE(table_.release("k", g.token, at(2)));
}

TEST_F(LockTableTest, ExpiredLeaseFreesTheKeyAndIsReported) {
  Grant g = grant(R::exclusive().ttl(100).session(5));
  RequestId w = queue(R::exclusive().ttl(40));
  table_.advance(at(99));
  EXPECT_TRUE(events().empty());
  table_.advance(at(100));
  std::vector<Event> ev = table_.take_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, Kind::expired);
  EXPECT_EQ(ev[0].grant.id, g.id);
  EXPECT_EQ(ev[0].grant.token, g.token);
  EXPECT_EQ(ev[0].grant.expires, at(100));
  EXPECT_EQ(ev[0].grant.session, 5u);
  EXPECT_EQ(ev[1].kind, Kind::granted);
  EXPECT_EQ(ev[1].grant.id, w);
  EXPECT_EQ(ev[1].grant.expires, at(140));  // its lease starts at the grant
  EXPECT_FALSE(table_.holds("k", g.token));
  EXPECT_FALSE(table_.release("k", g.token, at(100)));
}

TEST_F(LockTableTest, ExpiryIsNoticedByAnyCallNotOnlyAdvance) {
  Grant g = grant(R::exclusive().ttl(100));
  Grant h = grant(R::exclusive().ttl(100), at(100));  // acquire advances first
  EXPECT_GT(h.token, g.token);
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::expired, g.id}}));
}

// --- lock-delay

TEST_F(LockTableTest, LockDelayAfterExpiryBlocksFairAndNonFairUntilExpiryPlusDelay) {
  grant(R::shared().ttl(100).lock_delay(50));
  table_.advance(at(100));
  table_.take_events();
  EXPECT_EQ(table_.inspect("k").delayed_until, at(150));
  EXPECT_EQ(table_.next_wakeup(), at(150));
  EXPECT_EQ(acquire(R::shared().until(at(120)), at(120)).status, AcquireStatus::busy);
  EXPECT_EQ(acquire(R::shared().non_fair().until(at(120)), at(120)).status, AcquireStatus::busy);
  RequestId fair = queue(R::shared(), at(120));
  RequestId barger = queue(R::shared().non_fair(), at(120));
  table_.advance(at(149));
  EXPECT_TRUE(events().empty());
  table_.advance(at(150));
  EXPECT_EQ(events(), (std::vector<std::pair<Kind, RequestId>>{{Kind::granted, fair},
                                                               {Kind::granted, barger}}));
  EXPECT_EQ(table_.inspect("k").delayed_until, std::nullopt);
}

TEST_F(LockTableTest, LockDelayIsMeasuredFromTheExpiryNotFromWhenItIsNoticed) {
  grant(R::exclusive().ttl(100).lock_delay(50));
  grant(R::exclusive("late").ttl(100).lock_delay(50));
  table_.advance(at(130));  // 30 ms late: the delay still ends at 150
  EXPECT_EQ(table_.inspect("k").delayed_until, at(150));
  EXPECT_EQ(acquire(R::exclusive().until(at(140)), at(140)).status, AcquireStatus::busy);
  EXPECT_EQ(acquire(R::exclusive().until(at(150)), at(150)).status, AcquireStatus::granted);

  // Noticed only after the delay is over: nothing is blocked at all.
  LockTable late;
  late.acquire(R::exclusive().ttl(100).lock_delay(50), at(0));
  late.advance(at(200));
  EXPECT_EQ(late.inspect("k").delayed_until, std::nullopt);
  EXPECT_TRUE(late.empty());
}

TEST_F(LockTableTest, ReleaseDoesNotStartALockDelay) {
  Grant g = grant(R::exclusive().ttl(100).lock_delay(1000));
  ASSERT_TRUE(table_.release("k", g.token, at(50)));
  EXPECT_TRUE(table_.empty());
  EXPECT_EQ(acquire(R::exclusive().until(at(50)), at(50)).status, AcquireStatus::granted);
}

TEST_F(LockTableTest, ExpiredSharedHolderDelaysNewGrantsWhileOthersKeepHolding) {
  grant(R::shared().ttl(100).lock_delay(50));
  Grant stays = grant(R::shared().ttl(1000));
  table_.advance(at(100));
  table_.take_events();
  EXPECT_TRUE(table_.holds("k", stays.token));
  EXPECT_EQ(acquire(R::shared().non_fair().until(at(120)), at(120)).status, AcquireStatus::busy);
  EXPECT_EQ(acquire(R::shared().until(at(150)), at(150)).status, AcquireStatus::granted);
}

TEST_F(LockTableTest, TheLongestOfOverlappingLockDelaysWins) {
  grant(R::shared().ttl(100).lock_delay(80));
  grant(R::shared().ttl(110).lock_delay(10));
  table_.advance(at(110));
  EXPECT_EQ(table_.inspect("k").delayed_until, at(180));
  table_.advance(at(179));
  EXPECT_FALSE(table_.empty());
  table_.advance(at(180));
  EXPECT_TRUE(table_.empty());
}

// --- tokens

TEST_F(LockTableTest, TokensStrictlyIncreasePerKeyAcrossSharedAndExclusiveGrants) {
  std::vector<std::uint64_t> tokens;
  Grant s1 = grant(R::shared());
  Grant s2 = grant(R::shared());
  grant(R::exclusive("elsewhere"));
  RequestId x = queue(R::exclusive());
  RequestId s3 = queue(R::shared());
  tokens = {s1.token, s2.token};
  ASSERT_TRUE(table_.release("k", s1.token, at(1)));
  ASSERT_TRUE(table_.release("k", s2.token, at(1)));
  std::vector<Event> ev = table_.take_events();
  ASSERT_EQ(ev.size(), 1u);
  ASSERT_EQ(ev[0].grant.id, x);
  tokens.push_back(ev[0].grant.token);
  ASSERT_TRUE(table_.release("k", ev[0].grant.token, at(2)));
  ev = table_.take_events();
  ASSERT_EQ(ev.size(), 1u);
  ASSERT_EQ(ev[0].grant.id, s3);
  tokens.push_back(ev[0].grant.token);
  tokens.push_back(grant(R::shared().non_fair(), at(3)).token);
  for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_LT(tokens[i - 1], tokens[i]);
}

TEST_F(LockTableTest, TokensComeFromTheGivenTokenSource) {
  CountingTokenSource source(1000);
  LockTable table(&source);
  AcquireResult a = table.acquire(R::exclusive("a"), at(0));
  AcquireResult b = table.acquire(R::shared("b"), at(0));
  EXPECT_EQ(a.grant.token, 1001u);
  EXPECT_EQ(b.grant.token, 1002u);
  EXPECT_EQ(source.last(), 1002u);
}

// wardend's TokenSource persists reservations and may fail; the table must stay whole
// and serve the queue on a later call.
TEST(LockTableTokenSource, AFailureLeavesTheWaiterForTheNextCall) {
  class FlakyTokens final : public TokenSource {
   public:
    std::uint64_t next() override {
      if (fail) throw std::runtime_error("cannot reserve tokens");
      return ++last_;
    }
    std::uint64_t last() const override { return last_; }
    bool fail = false;

   private:
    std::uint64_t last_ = 0;
  } tokens;
  LockTable table(&tokens);
  AcquireResult held = table.acquire(R::exclusive(), at(0));
  AcquireResult waiter = table.acquire(R::exclusive(), at(0));
  ASSERT_EQ(waiter.status, AcquireStatus::queued);

  tokens.fail = true;
  EXPECT_THROW(table.acquire(R::exclusive("other"), at(1)), std::runtime_error);
  EXPECT_EQ(table.stats().keys, 1u);  // "other" was not created
  EXPECT_THROW(table.release("k", held.grant.token, at(2)), std::runtime_error);
  EXPECT_EQ(waiter_ids(table.inspect("k")), std::vector<RequestId>{waiter.id});

  tokens.fail = false;
  table.advance(at(3));
  std::vector<Event> ev = table.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Kind::granted);
  EXPECT_EQ(ev[0].grant.id, waiter.id);
  EXPECT_GT(ev[0].grant.token, held.grant.token);
  EXPECT_FALSE(table.holds("k", held.grant.token));
}

}  // namespace
}  // namespace warden::table
