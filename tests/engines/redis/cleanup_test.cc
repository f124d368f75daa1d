// redis:// leaves nothing behind: a lock's keys are deleted when it is idle (no
// holders, no waiters), a timed-out or cancelled waiter withdraws at once, a closed
// client releases what it held, and every key has an expiry in case nobody is left
// to delete it.
#include <gtest/gtest.h>

#include <future>
#include <stop_token>
#include <string>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(RedisCleanup, ReleasedLockLeavesNoKeys) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  Lease exclusive = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(exclusive);
  Lease shared = client.lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);
  EXPECT_FALSE(probe.warden_keys().empty()) << "held locks have no keys: wrong key names?";
  exclusive.release();
  shared.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST(RedisCleanup, TimedOutAndCancelledWaitersLeaveNoTrace) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client waiter = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  // Timed out.
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_EQ(queued(probe, "g", "x"), 0) << "a timed-out waiter is still queued";

  // Cancelled.
  std::stop_source stop;
  auto cancelled =
      acquire_queued(waiter, probe, "x", Mode::shared, Wait::forever(), stop.get_token());
  ASSERT_EQ(queued(probe, "g", "x"), 1);
  stop.request_stop();
  ASSERT_EQ(cancelled.wait_for(kNoHang), std::future_status::ready)
      << "cancel did not end the wait";
  EXPECT_FALSE(cancelled.get());
  EXPECT_EQ(queued(probe, "g", "x"), 0) << "a cancelled waiter is still queued";
  const std::string tag = lock_tag("g", "x");
  EXPECT_EQ(probe.command({"LLEN", tag + ":q"}), "0") << "queue entries left behind";
  EXPECT_EQ(probe.command({"ZCARD", tag + ":p"}), "0") << "admitted waiters left behind";

  held.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST(RedisCleanup, ClosedClientReleasesWhatItHeld) {
  RedisServer server;
  RedisProbe probe(server);
  {
    // Lockable counts that are never unlocked: the client's last handle going away
    // is the end of its session, and it releases them.
    Client client = Client::open(server.uri());
    Lock exclusive = client.lock("g", "x");
    ASSERT_TRUE(exclusive.try_lock());
    Lock shared = client.lock("g", "y");
    ASSERT_TRUE(shared.try_lock_shared());
    EXPECT_FALSE(probe.warden_keys().empty());
  }
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST(RedisCleanup, EveryKeyHasAnExpiryWhileTheLockIsBusy) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client waiter = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(10s));
  ASSERT_EQ(queued(probe, "g", "x"), 1);

  const auto keys = probe.warden_keys();
  EXPECT_GE(keys.size(), 3u) << "holders, info and queue keys expected:" << describe(keys);
  for (const auto& key : keys) {
    const long long pttl = std::stoll(probe.command({"PTTL", key}));
    EXPECT_GT(pttl, 0) << key << " has no expiry (PTTL " << pttl << ")";
  }
  held.release();
  Lease next = waiting.get();
  ASSERT_TRUE(next);
  next.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST(RedisCleanup, ManyShortLivedLocksLeaveNoKeys) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  for (int i = 0; i < 50; ++i) {
    Lease lease = client.lock("g", "item-" + std::to_string(i))
                      .acquire(i % 2 == 0 ? Mode::exclusive : Mode::shared, Wait::none());
    ASSERT_TRUE(lease);
  }
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing
