// etcd:// leaves nothing behind: a released grant's key is deleted, a try on a busy
// lock and a timed-out or cancelled wait delete their request key before they return,
// a closed Client revokes its session (and every key on it goes at once), and a
// withdrawal the cluster could not confirm is retried until it is.
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

TEST(EtcdCleanup, ReleasedLocksLeaveNoKeys) {
  EtcdCluster cluster;
  Client client = Client::open(cluster.uri());
  Lease exclusive = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(exclusive);
  Lease shared = client.lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);
  Lease shared_too = Client::open(cluster.uri()).lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared_too);
  EXPECT_EQ(requests(cluster, "g", "x"), 1u) << "a held lock has no key: wrong key names?";
  EXPECT_EQ(requests(cluster, "g", "y"), 2u);
  exclusive.release();
  shared.release();
  shared_too.release();
  EXPECT_TRUE(warden_keys(cluster).empty()) << "left:" << describe(warden_keys(cluster));

  for (int i = 0; i < 20; ++i) {
    Lease lease = client.lock("g", "item-" + std::to_string(i % 5))
                      .acquire(i % 2 == 0 ? Mode::exclusive : Mode::shared, Wait::none());
    ASSERT_TRUE(lease);
  }
  EXPECT_TRUE(warden_keys(cluster).empty()) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdCleanup, TryTimedOutAndCancelledWaitsLeaveNoKeys) {
  EtcdCluster cluster;
  Client holder = Client::open(cluster.uri());
  Client waiter = Client::open(cluster.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto only_the_holder = [&] { return lock_keys(cluster, "g", "x").size() == 1; };

  // A try on a busy lock.
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::shared, Wait::none()));
  EXPECT_TRUE(only_the_holder()) << "a failed try left its key:"
                                 << describe(lock_keys(cluster, "g", "x"));

  // A timed-out wait.
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_TRUE(only_the_holder()) << "a timed-out wait left its key:"
                                 << describe(lock_keys(cluster, "g", "x"));

  // A wait cancelled through its stop token.
  std::stop_source stop;
  auto cancelled =
      acquire_queued(waiter, cluster, "x", Mode::shared, Wait::forever(), stop.get_token());
  ASSERT_EQ(requests(cluster, "g", "x"), 2u) << "the waiter did not queue";
  stop.request_stop();
  ASSERT_EQ(cancelled.wait_for(kPrompt), std::future_status::ready) << "cancel did not end the wait";
  EXPECT_FALSE(cancelled.get());
  EXPECT_TRUE(only_the_holder()) << "a cancelled wait left its key:"
                                 << describe(lock_keys(cluster, "g", "x"));

  // A wait on a jthread that is destroyed (which requests stop and joins).
  {
    std::jthread waiting([&](std::stop_token token) {
      EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::forever(), token));
    });
    ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "x") == 2; }))
        << "the jthread's wait did not queue";
  }
  EXPECT_TRUE(only_the_holder()) << "a wait ended by its jthread's destruction left its key:"
                                 << describe(lock_keys(cluster, "g", "x"));

  held.release();
  EXPECT_TRUE(warden_keys(cluster).empty()) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdCleanup, ClosedClientLeavesNoKeys) {
  EtcdCluster cluster;
  Client holder = Client::open(cluster.uri());
  Lease held = holder.lock("g", "w").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  // Closed while holding: Lockable counts that are never unlocked end with the
  // Client's last handle, and its session with them.
  {
    Client client = Client::open(cluster.uri());
    Lock exclusive = client.lock("g", "x");
    ASSERT_TRUE(exclusive.try_lock());
    Lock shared = client.lock("g", "y");
    ASSERT_TRUE(shared.try_lock_shared());
    EXPECT_EQ(warden_keys(cluster).size(), 3u) << describe(warden_keys(cluster));
  }
  EXPECT_EQ(warden_keys(cluster).size(), 1u)
      << "a closed Client's grants are still held:" << describe(warden_keys(cluster));

  // Closed while waiting: the waiting thread has the Client's last handle, and the
  // Client closes as its cancelled wait returns.
  {
    std::stop_source stop;
    std::future<bool> waiting;
    {
      Client client = Client::open(cluster.uri());
      // z: something held on the same session as the wait, for the close to take along.
      waiting = std::async(std::launch::async, [other = client.lock("g", "z"),
                                                lock = client.lock("g", "w"),
                                                token = stop.get_token()]() mutable {
        const bool took_other = other.try_lock();
        const bool granted = lock.acquire(Mode::exclusive, Wait::forever(), token).valid();
        return took_other && !granted;
      });
    }
    ASSERT_TRUE(eventually([&] { return warden_keys(cluster).size() == 3; }))
        << "the waiter did not queue:" << describe(warden_keys(cluster));
    stop.request_stop();
    ASSERT_EQ(waiting.wait_for(kPrompt), std::future_status::ready);
    EXPECT_TRUE(waiting.get()) << "the waiter did not hold z, or was granted w";
  }
  EXPECT_EQ(warden_keys(cluster).size(), 1u)
      << "a closed Client's requests are still there:" << describe(warden_keys(cluster));
  held.release();
  EXPECT_TRUE(warden_keys(cluster).empty()) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdCleanup, WaitCancelledWhileTheMemberIsFrozenIsWithdrawnOnceItIsBack) {
  EtcdCluster cluster;
  // A long TTL: the sessions outlive the pause, so only the retried delete can remove
  // the cancelled request's key.
  const ClientOptions options = with_ttl(30s, 500ms);
  Client holder = Client::open(cluster.uri(), options);
  Client waiter = Client::open(cluster.uri(), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  std::stop_source stop;
  auto waiting =
      acquire_queued(waiter, cluster, "x", Mode::exclusive, Wait::forever(), stop.get_token());
  ASSERT_EQ(requests(cluster, "g", "x"), 2u) << "the waiter did not queue";

  cluster.pause(0);
  stop.request_stop();
  // The wait ends without waiting for the cluster: empty, or the error of a read that
  // was under way when the member froze.
  ASSERT_EQ(waiting.wait_for(2 * options.op_timeout + kPrompt), std::future_status::ready)
      << "a cancelled wait hung on a frozen member";
  try {
    EXPECT_FALSE(waiting.get());
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == Errc::deadline_exceeded || e.code() == Errc::unavailable)
        << to_string(e.code()) << ": " << e.what();
  }
  std::this_thread::sleep_for(500ms);
  cluster.resume(0);

  // Its key could not be deleted while the member was frozen; the keeper deletes it now.
  EXPECT_TRUE(eventually([&] { return requests(cluster, "g", "x") == 1; }, 5s))
      << "the cancelled request's key is still there:" << describe(lock_keys(cluster, "g", "x"));
  EXPECT_FALSE(held.lost());
  EXPECT_TRUE(holder.check(held.sequencer()));
  held.release();
  Lease next = waiter.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(next) << "the waiter cannot take the free lock";
  next = Lease();
  EXPECT_TRUE(warden_keys(cluster).empty()) << "left:" << describe(warden_keys(cluster));
}

}  // namespace
}  // namespace warden::testing
