// redlock:// Client::inspect and Client::list: a lock held by a quorum shows its holder
// (the Lease's token, time left within the TTL) and never waiters; a key on a minority
// of masters is not a holder; a group lists its held locks whatever bytes their names
// hold; too few masters is unavailable; reading changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

TEST(RedlockInspect, ShowsTheQuorumsHolderAndNoWaiters) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options(10s));
  EXPECT_TRUE(client.inspect("g", "n").holders.empty());

  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const LockStatus s = client.inspect("g", "n");
  EXPECT_EQ(s.group, "g");
  EXPECT_EQ(s.name, "n");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].mode, Mode::exclusive);
  EXPECT_EQ(s.holders[0].token, held.token());
  ASSERT_TRUE(s.holders[0].ttl_left);
  EXPECT_GT(s.holders[0].ttl_left->count(), 0);
  EXPECT_LE(*s.holders[0].ttl_left, 10s);
  EXPECT_TRUE(s.waiters.empty());

  held.release();
  EXPECT_TRUE(client.inspect("g", "n").holders.empty());
}

TEST(RedlockInspect, AKeyOnAMinorityIsNotAHolder) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options());
  masters.plant("g", "n", {0}, "someone:7", 10s);
  EXPECT_TRUE(client.inspect("g", "n").holders.empty());
  EXPECT_TRUE(client.list("g").empty());
  // Planted on a quorum, with its token: that is a holder.
  masters.plant("g", "n", {0, 1}, "someone:7", 10s);
  const LockStatus s = client.inspect("g", "n");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].token, 7u);
}

TEST(RedlockInspect, ListsTheGroupsHeldLocksWhateverTheirNames) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options());
  const std::vector<std::string> names = {"plain", "a*b?c[d]e", "{x}:rl", "x/y z\\w", "%2F"};
  std::vector<Lease> leases;
  for (const auto& name : names) {
    leases.push_back(client.lock("g", name).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(leases.back()) << name;
  }
  Lease other = client.lock("other", "plain").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(other);

  const auto listed = client.list("g");
  std::vector<std::string> got;
  for (const auto& lock : listed) {
    got.push_back(lock.name);
    EXPECT_EQ(lock.holders, 1u) << lock.name;
    EXPECT_EQ(lock.waiters, 0u) << lock.name;
  }
  std::vector<std::string> want = names;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);

  for (auto& lease : leases) lease.release();
  EXPECT_TRUE(client.list("g").empty());
}

TEST(RedlockInspect, TooFewMastersIsUnavailableAndReadingChangesNothing) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto before = masters.lock_keys("g", "n");
  for (int i = 0; i < 3; ++i) (void)client.inspect("g", "n");
  (void)client.list("g");
  EXPECT_EQ(masters.lock_keys("g", "n"), before);
  EXPECT_TRUE(client.check(held.sequencer()));

  masters.server(1).kill9();
  masters.server(2).kill9();
  fails_with(Errc::unavailable, [&] { (void)client.inspect("g", "n"); });
  fails_with(Errc::unavailable, [&] { (void)client.list("g"); });
}

}  // namespace
}  // namespace warden::testing
