// zk://'s asynchronous acquires (engines/zookeeper/async_waits.h): every one driven by
// one thread on the engine's session, however many wait, granted in the queue's order;
// a cancelled wait leaves no node; a lost connection is waited out with the node kept; a
// frozen server ends a timed wait by its bound; a wait whose session expired is made
// again on a new one.
#include "warden/async.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/async_outcome.h"
#include "test_util.h"
#include "torture/partition_proxy.h"

namespace warden::testing {
namespace {

constexpr Clock::duration kPatience = 30s;      // for what must happen, on a loaded machine
constexpr Clock::duration kLongDeadline = 60s;  // a wait that must not run out here

// 100 waits on one lock from one Client: queued on ZooKeeper without a thread each (the
// blocking acquire would take a thread per wait), and granted in the order asked as
// each releases; nothing left once all are done.
TEST(ZkAsync, ManyWaitsTakeNoThreadEachAndAreGrantedInOrder) {
  GrantOrder order;  // before the Clients, whose waits it is told of
  // 100, not the redis:// test's 300: each hand-off lists the lock (every waiter's name)
  // under the sanitizers, and beside two CPU hogs 300 of them took 28 s.
  constexpr int kWaits = 100;
  AsyncOutcome first;  // before the Clients, whose waits tell it
  ZooKeeperEnsemble zk;
  Client holder = Client::open(zk.uri());
  Client client = Client::open(zk.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  // One wait first, so that the threads a first wait starts (the Client's completion
  // thread) are counted before the rest.
  Lock lock = client.lock("g", "x");
  AcquireHandle first_handle =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == 2; }));
  const int threads_before = threads_now();

  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
  }
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == kWaits + 2; }, kPatience))
      << "queued: " << requests(zk, "g", "x");
  EXPECT_LE(threads_now(), threads_before + 2) << "the waits took threads of their own";

  held.release();
  ASSERT_TRUE(first.wait_for(kPatience));
  first.take();  // released: the others follow one by one
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }, kLongDeadline))
      << order.told() << " of " << kWaits << " told";
  EXPECT_TRUE(order.in_order(kWaits)) << "granted out of order";
  EXPECT_TRUE(no_requests(zk, "g", "x", kPatience)) << describe(lock_children(zk, "g", "x"));
}

// A lock whose nodes do not exist yet (a new group): the wait makes its parents first. A
// try on a held lock is told nothing and leaves no node; a cancelled wait likewise.
TEST(ZkAsync, AWaitMakesItsLocksParentsAndATryOrACancelLeavesNoNode) {
  AsyncOutcome made;       // before the Clients, whose waits tell it
  AsyncOutcome tried;      // before the Clients, whose waits tell it
  AsyncOutcome cancelled;  // before the Clients, whose waits tell it
  ZooKeeperEnsemble zk;
  Client client = Client::open(zk.uri());
  Client other = Client::open(zk.uri());
  AcquireHandle a =
      client.lock("new-group", "x")
          .acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), made.callback());
  ASSERT_TRUE(made.told_granted(kPatience)) << "the wait for a lock without parents";

  Lease held = other.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AcquireHandle b =
      client.lock("g", "y").acquire_async(Mode::exclusive, Wait::none(), tried.callback());
  ASSERT_TRUE(tried.wait_for(kPatience));
  EXPECT_FALSE(tried.granted());
  EXPECT_EQ(tried.error(), nullptr);
  EXPECT_TRUE(eventually([&] { return requests(zk, "g", "y") == 1; }))
      << "a try left its node: " << describe(lock_children(zk, "g", "y"));

  AcquireHandle c = client.lock("g", "y").acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline),
                                                        cancelled.callback());
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "y") == 2; }));
  c.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience));
  EXPECT_FALSE(cancelled.granted());
  EXPECT_EQ(cancelled.error(), nullptr);
  EXPECT_TRUE(eventually([&] { return requests(zk, "g", "y") == 1; }))
      << "a cancelled wait left its node: " << describe(lock_children(zk, "g", "y"));
}

// The server frozen (SIGSTOP) for less than the session timeout but longer than the C
// client keeps a silent connection: the waits keep their nodes (their session lives) and
// are granted in turn once the holder releases.
TEST(ZkAsync, WaitsOutliveALostConnectionAndAreGrantedInTurn) {
  AsyncOutcome first, second;  // before the Clients, whose waits tell it
  ZooKeeperEnsemble zk;
  const std::string uri = uri_with(zk, "session_timeout_ms=4000&on_suspend=wait");
  const ClientOptions options = with_ttl(4s, 5s, 300ms);
  Client holder = Client::open(uri, options);
  Client client = Client::open(uri, options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = client.lock("g", "x");
  AcquireHandle a =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  AcquireHandle b =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), second.callback());
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == 3; }));

  zk.pause(0);
  std::this_thread::sleep_for(3s);  // past the 2/3 of the session after which it reconnects
  zk.resume(0);
  std::this_thread::sleep_for(700ms);  // reconnected
  EXPECT_EQ(first.calls(), 0) << "a lost connection ended a wait";
  EXPECT_EQ(second.calls(), 0) << "a lost connection ended a wait";
  EXPECT_EQ(requests(zk, "g", "x"), 3u) << describe(lock_children(zk, "g", "x"));

  held.release();
  ASSERT_TRUE(first.told_granted(kPatience)) << "the first in line";
  first.take();
  EXPECT_TRUE(second.told_granted(kPatience)) << "the second in line";
  second.take();
  EXPECT_TRUE(no_requests(zk, "g", "x", kPatience)) << describe(lock_children(zk, "g", "x"));
}

// A timed wait on a server that freezes is ended by its bound (its deadline, then an
// op_timeout for the call in flight), told nothing, and its node is deleted once the
// server answers again.
TEST(ZkAsync, ATimedWaitOnAFrozenServerEndsByItsBoundAndLeavesNoNode) {
  AsyncOutcome timed;  // before the Clients, whose waits tell it
  // 1 s ticks, so that the server grants the 20 s sessions asked for (at most 20 ticks):
  // however long a loaded machine takes to tell the wait, the freeze ends no session.
  ZooKeeperOptions long_sessions;
  long_sessions.tick_ms = 1000;
  ZooKeeperEnsemble zk(long_sessions);
  const std::string uri = uri_with(zk, "session_timeout_ms=20000&on_suspend=wait");
  const ClientOptions options = with_ttl(20s, 1s);
  Client holder = Client::open(uri, options);
  Client client = Client::open(uri, options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AcquireHandle a =
      client.lock("g", "x").acquire_async(Mode::exclusive, Wait::up_to(3s), timed.callback());
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == 2; }));

  zk.pause(0);
  const bool told = timed.wait_for(kPatience);
  zk.resume(0);
  ASSERT_TRUE(told) << "a timed wait outlived a frozen server";
  EXPECT_FALSE(timed.granted());
  EXPECT_EQ(timed.error(), nullptr) << "a wait that ran out is told nothing";
  EXPECT_TRUE(eventually([&] { return requests(zk, "g", "x") == 1; }, kPatience))
      << "the wait's node was left: " << describe(lock_children(zk, "g", "x"));
  held.release();
}

// The waits' client cut off from ZooKeeper (a relay that stops passing packets) for
// longer than its session timeout, while the server and the holder go on: the server
// expires the waits' session with their nodes, and once the relay heals each wait queues
// again when the engine has opened the next session (one thread opens it for all, not a
// thread per wait), behind the holder, and is granted in order once it releases.
TEST(ZkAsync, WaitsWhoseSessionExpiredQueueAgainOnANewOneWithoutAThreadEach) {
  GrantOrder order;  // before the Clients, whose waits it is told of
  constexpr int kWaits = 50;
  AsyncOutcome first;  // before the Clients, whose waits tell it
  ZooKeeperEnsemble zk;
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  Client holder = Client::open(uri_with(zk, "session_timeout_ms=4000"), with_ttl(4s));
  Client client = Client::open(
      torture::proxied_url(uri_with(zk, "session_timeout_ms=2000&on_suspend=wait"), relays),
      with_ttl(2s, 2s));
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = client.lock("g", "x");
  AcquireHandle a =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == 2; }));
  const int threads_before = threads_now();
  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
  }
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == kWaits + 2; }, kPatience));
  const std::vector<std::string> before = lock_children(zk, "g", "x");

  for (auto& relay : relays) {
    relay->cut();  // new connections get no answer
    relay->silence_connections();
  }
  // The server expires the session 2 s after its last word, and its nodes with it.
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == 1; }, kPatience))
      << describe(lock_children(zk, "g", "x"));
  for (auto& relay : relays) relay->heal();
  // Every wait queued again: as many nodes, none of them the old ones but the holder's.
  ASSERT_TRUE(eventually(
      [&] {
        const auto now = lock_children(zk, "g", "x");
        if (now.size() != kWaits + 2) return false;
        int kept = 0;
        for (const auto& node : now) kept += std::count(before.begin(), before.end(), node);
        return kept == 1;
      },
      kPatience))
      << describe(lock_children(zk, "g", "x"));
  EXPECT_LE(threads_now(), threads_before + 2)
      << "the waits took threads of their own to queue again";
  EXPECT_EQ(first.calls(), 0);
  EXPECT_EQ(order.told(), 0u);

  held.release();
  EXPECT_TRUE(first.told_granted(kPatience)) << "the first wait whose session expired";
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }, kPatience))
      << order.told() << " of " << kWaits << " told";
  EXPECT_TRUE(order.in_order(kWaits)) << "queued again out of the order asked: "
                                       << order.describe();
  EXPECT_TRUE(no_requests(zk, "g", "x", kPatience)) << describe(lock_children(zk, "g", "x"));
}

}  // namespace
}  // namespace warden::testing
