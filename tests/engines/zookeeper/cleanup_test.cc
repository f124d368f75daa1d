// zk:// leaves nothing behind: a released grant's node is deleted, a try on a busy lock
// and a timed-out or cancelled wait delete their request node before they return, a
// closed Client closes its session (and every ephemeral node of it goes at once), a
// withdrawal the server could not confirm is retried until it is, and the server's
// container check removes the emptied lock and group nodes.
#include <gtest/gtest.h>

#include <future>
#include <stop_token>
#include <string>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

// The server deletes an empty container on its own schedule: between the acquire's
// create of the group node (found there) and of the lock node under it, the group may
// go. The acquire makes the parents again rather than fail with "no node". With the check
// every millisecond and each lock left empty behind it, the race comes up in a few
// hundred acquires.
TEST(ZkCleanup, AnAcquireRacingTheContainerCheckMakesTheRemovedParentsAgain) {
  ZooKeeperEnsemble zk(ZooKeeperOptions{.container_check_ms = 1});
  Client client = Client::open(zk.uri());
  const auto until = Clock::now() + 6s;
  int acquired = 0;
  for (int i = 0; Clock::now() < until; ++i) {
    Lease lease;
    ASSERT_NO_THROW(lease = client.lock("g", "x" + std::to_string(i))
                                .acquire(Mode::exclusive, Wait::up_to(5s)))
        << "acquire " << i;
    ASSERT_TRUE(lease) << "acquire " << i;
    lease.release();
    ++acquired;
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 8)));
  }
  EXPECT_GT(acquired, 0);
}

TEST(ZkCleanup, ReleasedLocksLeaveNoNodes) {
  ZooKeeperEnsemble zk;
  Client client = Client::open(zk.uri());
  Lease exclusive = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(exclusive);
  Lease shared = client.lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);
  Lease shared_too = Client::open(zk.uri()).lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared_too);
  EXPECT_EQ(requests(zk, "g", "x"), 1u) << "a held lock has no node: wrong node names?"
                                        << describe(warden_tree(zk));
  EXPECT_EQ(requests(zk, "g", "y"), 2u) << describe(warden_tree(zk));
  exclusive.release();
  shared.release();
  shared_too.release();
  EXPECT_EQ(requests(zk, "g", "x"), 0u) << describe(lock_children(zk, "g", "x"));
  EXPECT_EQ(requests(zk, "g", "y"), 0u) << describe(lock_children(zk, "g", "y"));

  for (int i = 0; i < 20; ++i) {
    Lease lease = client.lock("g", "item-" + std::to_string(i % 5))
                      .acquire(i % 2 == 0 ? Mode::exclusive : Mode::shared, Wait::none());
    ASSERT_TRUE(lease);
  }
  for (int i = 0; i < 5; ++i) {
    const std::string name = "item-" + std::to_string(i);
    EXPECT_EQ(requests(zk, "g", name), 0u) << describe(lock_children(zk, "g", name));
  }
  // The emptied containers go at the server's next checks (every 500 ms here).
  EXPECT_TRUE(empty_prefix(zk)) << "left:" << describe(warden_tree(zk));
  EXPECT_TRUE(zk.exists("/warden")) << "the prefix node is persistent";
}

TEST(ZkCleanup, TryTimedOutAndCancelledWaitsLeaveNoNodes) {
  ZooKeeperEnsemble zk;
  Client holder = Client::open(zk.uri());
  Client waiter = Client::open(zk.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto only_the_holder = [&] { return requests(zk, "g", "x") == 1; };

  // A try on a busy lock.
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::shared, Wait::none()));
  EXPECT_TRUE(only_the_holder()) << "a failed try left its node:"
                                 << describe(lock_children(zk, "g", "x"));

  // A timed-out wait.
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::shared, Wait::up_to(300ms)));
  EXPECT_TRUE(only_the_holder()) << "a timed-out wait left its node:"
                                 << describe(lock_children(zk, "g", "x"));

  // A wait cancelled through its stop token.
  std::stop_source stop;
  auto cancelled =
      acquire_queued(waiter, zk, "x", Mode::shared, Wait::forever(), stop.get_token());
  ASSERT_EQ(requests(zk, "g", "x"), 2u) << "the waiter did not queue";
  stop.request_stop();
  ASSERT_EQ(cancelled.wait_for(kPrompt), std::future_status::ready) << "cancel did not end the wait";
  EXPECT_FALSE(cancelled.get());
  EXPECT_TRUE(only_the_holder()) << "a cancelled wait left its node:"
                                 << describe(lock_children(zk, "g", "x"));

  // A wait on a jthread that is destroyed (which requests stop and joins).
  {
    std::jthread waiting([&](std::stop_token token) {
      EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::forever(), token));
    });
    ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == 2; }))
        << "the jthread's wait did not queue";
  }
  EXPECT_TRUE(only_the_holder()) << "a wait ended by its jthread's destruction left its node:"
                                 << describe(lock_children(zk, "g", "x"));

  // The holder's grant was never disturbed; after it, the lock is free.
  EXPECT_FALSE(held.lost());
  EXPECT_TRUE(waiter.check(held.sequencer()));
  held.release();
  EXPECT_EQ(requests(zk, "g", "x"), 0u) << describe(lock_children(zk, "g", "x"));
  Lease next = waiter.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(next) << "the lock is not free";
  next = Lease();
  EXPECT_TRUE(empty_prefix(zk)) << "left:" << describe(warden_tree(zk));
}

TEST(ZkCleanup, ClosedClientLeavesNoNodes) {
  ZooKeeperEnsemble zk;
  Client holder = Client::open(zk.uri(), with_ttl(4s));
  Lease held = holder.lock("g", "w").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto nodes = [&] {
    return requests(zk, "g", "w") + requests(zk, "g", "x") + requests(zk, "g", "y") +
           requests(zk, "g", "z");
  };

  // Closed while holding: Lockable counts that are never unlocked end with the
  // Client's last handle, and its session with them.
  {
    Client client = Client::open(zk.uri());
    Lock exclusive = client.lock("g", "x");
    ASSERT_TRUE(exclusive.try_lock());
    Lock shared = client.lock("g", "y");
    ASSERT_TRUE(shared.try_lock_shared());
    EXPECT_EQ(nodes(), 3u) << describe(warden_tree(zk));
  }
  EXPECT_EQ(nodes(), 1u) << "a closed Client's grants are still held:"
                         << describe(warden_tree(zk));

  // Closed while waiting: the waiting thread has the Client's last handle, and the
  // Client closes as its cancelled wait returns.
  {
    std::stop_source stop;
    std::future<bool> waiting;
    {
      Client client = Client::open(zk.uri());
      // z: something held on the same session as the wait, for the close to take along.
      waiting = std::async(std::launch::async, [other = client.lock("g", "z"),
                                                lock = client.lock("g", "w"),
                                                token = stop.get_token()]() mutable {
        const bool took_other = other.try_lock();
        const bool granted = lock.acquire(Mode::exclusive, Wait::forever(), token).valid();
        return took_other && !granted;
      });
    }
    ASSERT_TRUE(eventually([&] { return nodes() == 3; }))
        << "the waiter did not queue:" << describe(warden_tree(zk));
    stop.request_stop();
    ASSERT_EQ(waiting.wait_for(kPrompt), std::future_status::ready);
    EXPECT_TRUE(waiting.get()) << "the waiter did not hold z, or was granted w";
  }
  EXPECT_EQ(nodes(), 1u) << "a closed Client's requests are still there:"
                         << describe(warden_tree(zk));
  EXPECT_FALSE(held.lost());
  held.release();
  EXPECT_EQ(nodes(), 0u) << describe(warden_tree(zk));
  EXPECT_TRUE(empty_prefix(zk)) << "left:" << describe(warden_tree(zk));
}

TEST(ZkCleanup, WaitCancelledWhileTheServerIsFrozenIsWithdrawnOnceItIsBack) {
  ZooKeeperEnsemble zk;
  // 4 s sessions outlive the 1.5 s freeze (the connection is not even given up), so
  // only the retried delete can remove the cancelled request's node.
  const std::string uri = uri_with(zk, "session_timeout_ms=4000");
  const ClientOptions options = with_ttl(4s, 500ms);
  Client holder = Client::open(uri, options);
  Client waiter = Client::open(uri, options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  std::stop_source stop;
  auto waiting =
      acquire_queued(waiter, zk, "x", Mode::exclusive, Wait::forever(), stop.get_token());
  ASSERT_EQ(requests(zk, "g", "x"), 2u) << "the waiter did not queue";

  zk.pause(0);
  stop.request_stop();
  // The wait ends without waiting for the server: empty, or the error of a call that
  // was under way when the server froze.
  ASSERT_EQ(waiting.wait_for(2 * options.op_timeout + kPrompt), std::future_status::ready)
      << "a cancelled wait hung on a frozen server";
  try {
    EXPECT_FALSE(waiting.get());
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == Errc::deadline_exceeded || e.code() == Errc::unavailable)
        << to_string(e.code()) << ": " << e.what();
  }
  std::this_thread::sleep_for(500ms);
  zk.resume(0);

  EXPECT_TRUE(eventually([&] { return requests(zk, "g", "x") == 1; }, 5s))
      << "the cancelled request's node is still there:" << describe(lock_children(zk, "g", "x"));
  EXPECT_TRUE(holder.check(held.sequencer()));
  held.release();
  Lease next = waiter.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(next) << "the waiter cannot take the free lock:"
                    << describe(lock_children(zk, "g", "x"));
  next = Lease();
  EXPECT_TRUE(no_requests(zk, "g", "x")) << describe(lock_children(zk, "g", "x"));
}

}  // namespace
}  // namespace warden::testing
