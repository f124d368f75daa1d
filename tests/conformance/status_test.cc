// Conformance: Client::inspect and Client::list (`warden status`) show what the backend
// holds — holders with their leases' tokens, waiters in queue order, nothing once
// released — and a group's locks whatever bytes their names hold. What an engine cannot
// know (a lease's time left tied to a session, a waiter's deadline kept by the waiter)
// is absent, never made up. Engine-specific parts (a backend that is down, reading that
// changes nothing on the backend's own records) are in each engine's inspect_test.cc.
#include "warden/status.h"

#include <algorithm>
#include <string>
#include <vector>

#include "conformance/conformance_suite.h"

namespace warden::conformance {
namespace {

// Names that need escaping somewhere: glob specials (Redis SCAN), a hash-tag brace and
// key-suffix look-alikes (Redis), '/' and '%' (etcd keys, ZooKeeper nodes), spaces.
const std::vector<std::string> kAwkwardNames = {"plain", "a*b",     "q?",    "[x]", "{brace}",
                                                "c}:h",  "a:b/c d", "\\",    "/",   "a%2Fw",
                                                "100%",  "x:p",     "{x}:rl"};

TEST_P(Conformance, StatusShowsTheHolderAndTheWaitersInQueueOrder) {
  WARDEN_SKIP_UNLESS(shared);
  WARDEN_SKIP_UNLESS_QUEUE();
  Client client = open_client();
  Lease held = client.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Holder reader(open_client().lock(group(), "x", lock_options()), Mode::shared);
  ASSERT_TRUE(queue_reaches("x", 1));
  Holder writer(open_client().lock(group(), "x", lock_options()), Mode::exclusive);
  ASSERT_TRUE(queue_reaches("x", 2));

  const LockStatus s = client.inspect(group(), "x");
  EXPECT_EQ(s.group, group());
  EXPECT_EQ(s.name, "x");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].mode, Mode::exclusive);
  EXPECT_EQ(s.holders[0].token, held.token());
  if (s.holders[0].ttl_left) {
    EXPECT_GE(s.holders[0].ttl_left->count(), 0);
    EXPECT_LE(*s.holders[0].ttl_left, lock_options().ttl);
  }
  ASSERT_EQ(s.waiters.size(), 2u);
  EXPECT_EQ(s.waiters[0].mode, Mode::shared);
  EXPECT_EQ(s.waiters[1].mode, Mode::exclusive);
  EXPECT_FALSE(s.waiters[0].deadline_left) << "waits without a deadline";
  EXPECT_EQ(s.lock_delay_left.count(), 0);
}

TEST_P(Conformance, StatusShowsEverySharedHolderWithItsOwnToken) {
  WARDEN_SKIP_UNLESS(shared);
  Client one = open_client();
  Client two = open_client();
  Lease first = one.lock(group(), "x", lock_options()).acquire(Mode::shared, Wait::none());
  Lease second = two.lock(group(), "x", lock_options()).acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(first && second);
  const LockStatus s = one.inspect(group(), "x");
  ASSERT_EQ(s.holders.size(), 2u);
  std::vector<std::uint64_t> tokens;
  for (const auto& h : s.holders) {
    EXPECT_EQ(h.mode, Mode::shared);
    tokens.push_back(h.token);
  }
  std::sort(tokens.begin(), tokens.end());
  EXPECT_EQ(tokens, (std::vector<std::uint64_t>{first.token(), second.token()}));
  EXPECT_TRUE(s.waiters.empty());
}

TEST_P(Conformance, StatusOfAnExclusiveHolderHasItsToken) {
  Client client = open_client();
  EXPECT_TRUE(client.inspect(group(), "x").holders.empty());
  Lease held = client.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const LockStatus s = client.inspect(group(), "x");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].mode, Mode::exclusive);
  EXPECT_EQ(s.holders[0].token, held.token());
  EXPECT_TRUE(s.waiters.empty());
}

TEST_P(Conformance, AReleasedLockIsFreeAndNotListed) {
  Client client = open_client();
  Lease held = client.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  held.release();
  const LockStatus s = client.inspect(group(), "x");
  EXPECT_TRUE(s.holders.empty());
  EXPECT_TRUE(s.waiters.empty());
  EXPECT_EQ(s.lock_delay_left.count(), 0);
  EXPECT_TRUE(client.list(group()).empty());
}

TEST_P(Conformance, ListShowsEveryLockOfTheGroupWhateverItsName) {
  Client client = open_client();
  std::vector<Lease> leases;
  for (const auto& name : kAwkwardNames) {
    leases.push_back(
        client.lock(group(), name, lock_options()).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(leases.back()) << name;
  }
  // A group whose name this one's extends: its listing holds its own lock only.
  const std::string shorter = group().substr(0, group().size() - 1);
  Lease other =
      client.lock(shorter, "plain", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(other);
  const auto shorter_listed = client.list(shorter);
  ASSERT_EQ(shorter_listed.size(), 1u);
  EXPECT_EQ(shorter_listed[0].name, "plain");

  std::vector<std::string> want = kAwkwardNames;
  std::sort(want.begin(), want.end());
  std::vector<std::string> got;
  for (const auto& lock : client.list(group())) {
    got.push_back(lock.name);
    EXPECT_EQ(lock.holders, 1u) << lock.name;
    EXPECT_EQ(lock.waiters, 0u) << lock.name;
  }
  EXPECT_EQ(got, want);
  // Each name read back names the lock itself.
  for (const auto& name : kAwkwardNames) {
    EXPECT_EQ(client.inspect(group(), name).holders.size(), 1u) << name;
  }
}

TEST_P(Conformance, ListCountsAWaiter) {
  WARDEN_SKIP_UNLESS_QUEUE();
  Client client = open_client();
  Lease held = client.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Holder waiter(open_client().lock(group(), "x", lock_options()), Mode::exclusive);
  ASSERT_TRUE(queue_reaches("x", 1));
  const auto listed = client.list(group());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "x");
  EXPECT_EQ(listed[0].holders, 1u);
  EXPECT_EQ(listed[0].waiters, 1u);
}

TEST_P(Conformance, StatusChangesNothing) {
  Client client = open_client();
  Client other = open_client();
  Lease held = client.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  for (int i = 0; i < 3; ++i) {
    (void)client.inspect(group(), "x");
    (void)other.list(group());
  }
  EXPECT_TRUE(client.check(held.sequencer()));
  EXPECT_FALSE(grantable("x"));
  const auto token = held.token();
  held.release();
  Lease next =
      other.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::up_to(kPatience));
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
}

}  // namespace
}  // namespace warden::conformance
