// zk:// Client::inspect and Client::list: the lock node's children show the holders by
// the engine's rule (tokens = czxid, equal to the leases'; no time left: leases are the
// session's), the waiters in sequence order, and nothing once released; a group lists
// every lock, whatever bytes its name holds (escaped in node names); reading changes
// nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <stop_token>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

// Waits on `name` in `mode` on its own thread until the test ends, then gives up.
class Waiter {
 public:
  Waiter(Client& client, const std::string& name, Mode mode)
      : thread_([&client, name, mode](std::stop_token stop) {
          auto lease = client.lock("g", name).acquire(mode, Wait::forever(), stop);
        }) {}

 private:
  std::jthread thread_;
};

bool shows_waiters(const Client& client, const std::string& name, std::size_t n) {
  return eventually([&] { return client.inspect("g", name).waiters.size() == n; });
}

class ZkInspect : public ::testing::Test {
 protected:
  ZooKeeperEnsemble zk_;
};

TEST_F(ZkInspect, ShowsTheHolderAndTheWaitersInQueueOrder) {
  Client client = Client::open(zk_.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Waiter reader(client, "n", Mode::shared);
  ASSERT_TRUE(shows_waiters(client, "n", 1));
  Waiter writer(client, "n", Mode::exclusive);
  ASSERT_TRUE(shows_waiters(client, "n", 2));

  const LockStatus s = client.inspect("g", "n");
  EXPECT_EQ(s.group, "g");
  EXPECT_EQ(s.name, "n");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].mode, Mode::exclusive);
  EXPECT_EQ(s.holders[0].token, held.token());
  EXPECT_FALSE(s.holders[0].ttl_left);  // tied to the session
  ASSERT_EQ(s.waiters.size(), 2u);
  EXPECT_EQ(s.waiters[0].mode, Mode::shared);
  EXPECT_EQ(s.waiters[1].mode, Mode::exclusive);
  EXPECT_FALSE(s.waiters[0].deadline_left);
  EXPECT_EQ(s.lock_delay_left.count(), 0);
}

TEST_F(ZkInspect, ShowsASharedRunWithEachHoldersToken) {
  Client client = Client::open(zk_.uri());
  Client other = Client::open(zk_.uri());
  Lease first = client.lock("g", "n").acquire(Mode::shared, Wait::none());
  Lease second = other.lock("g", "n").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(first && second);
  Waiter writer(client, "n", Mode::exclusive);
  ASSERT_TRUE(shows_waiters(client, "n", 1));
  const LockStatus s = client.inspect("g", "n");
  ASSERT_EQ(s.holders.size(), 2u);
  EXPECT_EQ(s.holders[0].mode, Mode::shared);
  EXPECT_EQ(s.holders[1].mode, Mode::shared);
  EXPECT_EQ(s.holders[0].token, first.token());
  EXPECT_EQ(s.holders[1].token, second.token());
  ASSERT_EQ(s.waiters.size(), 1u);
  EXPECT_EQ(s.waiters[0].mode, Mode::exclusive);
}

TEST_F(ZkInspect, AReleasedLockIsFree) {
  Client client = Client::open(zk_.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  held.release();
  const LockStatus s = client.inspect("g", "n");
  EXPECT_TRUE(s.holders.empty());
  EXPECT_TRUE(s.waiters.empty());
  EXPECT_TRUE(client.list("g").empty());
}

TEST_F(ZkInspect, ListsEveryLockOfTheGroupWhateverItsName) {
  Client client = Client::open(zk_.uri());
  const std::vector<std::string> names{"a*b",   "q?",   "[x]",     "{brace}", "a/w",
                                       "a%2Fw", "100%", "a:b/c d", "/",       "plain"};
  std::vector<Lease> leases;
  for (const auto& name : names) {
    leases.push_back(client.lock("g", name).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(leases.back()) << name;
  }
  leases.push_back(client.lock("g2", "not-g").acquire(Mode::exclusive, Wait::none()));
  Waiter waiter(client, "plain", Mode::shared);
  ASSERT_TRUE(shows_waiters(client, "plain", 1));

  std::vector<std::string> want = names;
  std::sort(want.begin(), want.end());
  std::vector<std::string> got;
  for (const auto& l : client.list("g")) {
    got.push_back(l.name);
    EXPECT_EQ(l.holders, 1u) << l.name;
    EXPECT_EQ(l.waiters, l.name == "plain" ? 1u : 0u) << l.name;
  }
  EXPECT_EQ(got, want);
}

TEST_F(ZkInspect, ADownServerIsUnavailable) {
  Client client = Client::open(zk_.uri());
  zk_.kill9(0);
  for (const bool listing : {false, true}) {
    try {
      if (listing) {
        client.list("g");
      } else {
        client.inspect("g", "n");
      }
      ADD_FAILURE() << "no error from a stopped server";
    } catch (const Error& e) {
      // Suspended: the call fails on connection loss or on its own timeout.
      EXPECT_TRUE(e.code() == Errc::unavailable || e.code() == Errc::deadline_exceeded) << e.what();
    }
  }
}

TEST_F(ZkInspect, ReadingChangesNothing) {
  Client client = Client::open(zk_.uri());
  Client other = Client::open(zk_.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto tree = warden_tree(zk_);
  for (int i = 0; i < 3; ++i) {
    client.inspect("g", "n");
    other.list("g");
  }
  EXPECT_EQ(warden_tree(zk_), tree);
  EXPECT_FALSE(other.lock("g", "n").acquire(Mode::exclusive, Wait::none()));
  const auto token = held.token();
  held.release();
  Lease next = other.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
}

}  // namespace
}  // namespace warden::testing
