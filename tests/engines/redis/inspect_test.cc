// redis:// Client::inspect and Client::list: one read of the lock's keys shows the
// holders (tokens equal to the leases'), the waiters in queue order, and nothing once
// released; a group lists every lock, whatever bytes its name holds; reading changes
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

TEST(RedisInspect, ShowsTheHolderAndTheWaitersInQueueOrder) {
  RedisServer server;
  Client client = Client::open(server.uri());
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
  ASSERT_TRUE(s.holders[0].ttl_left);
  EXPECT_GT(s.holders[0].ttl_left->count(), 0);
  EXPECT_LE(*s.holders[0].ttl_left, LockOptions{}.ttl);
  ASSERT_EQ(s.waiters.size(), 2u);
  EXPECT_EQ(s.waiters[0].mode, Mode::shared);
  EXPECT_EQ(s.waiters[1].mode, Mode::exclusive);
  // Redis keeps a waiter's liveness, not its acquire deadline.
  EXPECT_FALSE(s.waiters[0].deadline_left);
  EXPECT_EQ(s.lock_delay_left.count(), 0);
}

TEST(RedisInspect, ShowsASharedRunWithEachHoldersToken) {
  RedisServer server;
  Client client = Client::open(server.uri());
  Client other = Client::open(server.uri());
  Lease first = client.lock("g", "n").acquire(Mode::shared, Wait::none());
  Lease second = other.lock("g", "n").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(first && second);
  const LockStatus s = client.inspect("g", "n");
  ASSERT_EQ(s.holders.size(), 2u);
  EXPECT_EQ(s.holders[0].mode, Mode::shared);
  EXPECT_EQ(s.holders[1].mode, Mode::shared);
  EXPECT_EQ(s.holders[0].token, first.token());
  EXPECT_EQ(s.holders[1].token, second.token());
  EXPECT_TRUE(s.waiters.empty());
}

TEST(RedisInspect, AReleasedLockIsFree) {
  RedisServer server;
  Client client = Client::open(server.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  held.release();
  const LockStatus s = client.inspect("g", "n");
  EXPECT_TRUE(s.holders.empty());
  EXPECT_TRUE(s.waiters.empty());
  EXPECT_EQ(s.lock_delay_left.count(), 0);
  EXPECT_TRUE(client.list("g").empty());
}

TEST(RedisInspect, ListsEveryLockOfTheGroupWhateverItsName) {
  RedisServer server;
  Client client = Client::open(server.uri());
  const std::vector<std::string> names{"a*b",     "q?", "[x]",   "{brace}", "c}:h",
                                       "a:b/c d", "\\", "plain", "x:p"};
  std::vector<Lease> leases;
  for (const auto& name : names) {
    leases.push_back(client.lock("g", name).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(leases.back()) << name;
  }
  leases.push_back(client.lock("g2", "not-g").acquire(Mode::exclusive, Wait::none()));
  leases.push_back(client.lock("h", "other").acquire(Mode::shared, Wait::none()));
  Waiter waiter(client, "plain", Mode::shared);
  ASSERT_TRUE(shows_waiters(client, "plain", 1));

  std::vector<std::string> want = names;
  std::sort(want.begin(), want.end());
  const auto listed = client.list("g");
  std::vector<std::string> got;
  for (const auto& l : listed) {
    got.push_back(l.name);
    EXPECT_EQ(l.holders, 1u) << l.name;
    EXPECT_EQ(l.waiters, l.name == "plain" ? 1u : 0u) << l.name;
  }
  EXPECT_EQ(got, want);
  // The name read back from the keys names the lock itself.
  for (const auto& name : names) EXPECT_EQ(client.inspect("g", name).holders.size(), 1u) << name;
}

TEST(RedisInspect, ADownServerIsUnavailable) {
  RedisServer server;
  Client client = Client::open(server.uri());
  server.kill9();
  for (const bool listing : {false, true}) {
    try {
      if (listing) {
        client.list("g");
      } else {
        client.inspect("g", "n");
      }
      ADD_FAILURE() << "no error from a stopped server";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
    }
  }
}

TEST(RedisInspect, ReadingChangesNothing) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  Client other = Client::open(server.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto keys = probe.warden_keys();
  const std::string info = probe.command({"HGETALL", lock_tag("g", "n") + ":i"});
  for (int i = 0; i < 3; ++i) {
    client.inspect("g", "n");
    other.list("g");
  }
  EXPECT_EQ(probe.warden_keys(), keys);
  EXPECT_EQ(probe.command({"HGETALL", lock_tag("g", "n") + ":i"}), info);
  EXPECT_FALSE(other.lock("g", "n").acquire(Mode::exclusive, Wait::none()));
  const auto token = held.token();
  held.release();
  Lease next = other.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
}

}  // namespace
}  // namespace warden::testing
