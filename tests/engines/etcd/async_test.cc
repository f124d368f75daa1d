// etcd://'s asynchronous acquires (engines/etcd/async_waits.h): every one driven by one
// thread of the Client's, their watches on one stream, however many wait; granted in the
// queue's order; a try or a cancelled wait leaves no key; a frozen member is left for
// another; a wait whose session was revoked queues again on a new one.
#include "warden/async.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/async_outcome.h"
#include "test_util.h"

namespace warden::testing {
namespace {

constexpr Clock::duration kPatience = 30s;      // for what must happen, on a loaded machine
constexpr Clock::duration kLongDeadline = 60s;  // a wait that must not run out here

// 100 waits on one lock from one Client: queued in etcd without a thread each (the
// blocking acquire would take a thread per wait), and granted in the queue's order (their
// tokens, the keys' create_revisions, rise) as each releases; nothing left once all are
// done.
TEST(EtcdAsync, ManyWaitsTakeNoThreadEachAndAreGrantedInTheQueuesOrder) {
  GrantOrder order;  // before the Clients, whose waits it is told of
  constexpr int kWaits = 100;
  AsyncOutcome first;  // before the Clients, whose waits tell it
  EtcdCluster cluster;
  Client holder = Client::open(cluster.uri());
  Client client = Client::open(cluster.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  // One wait first, so that the threads a first wait starts (the Client's completion
  // thread, gRPC's) are counted before the rest.
  Lock lock = client.lock("g", "x");
  AcquireHandle first_handle =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "x") == 2; }, kPatience));
  const int threads_before = threads_now();

  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
  }
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "x") == kWaits + 2; }, kPatience))
      << "queued: " << requests(cluster, "g", "x");
  EXPECT_LE(threads_now(), threads_before + 2) << "the waits took threads of their own";

  held.release();
  ASSERT_TRUE(first.told_granted(kPatience));
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }, kLongDeadline))
      << order.told() << " of " << kWaits << " told";
  EXPECT_TRUE(order.tokens_rising()) << "granted out of the queue's order";
  EXPECT_TRUE(no_warden_keys(cluster, kPatience)) << describe(warden_keys(cluster));
}

// A try on a held lock is told nothing and leaves no key; a cancelled wait likewise; a
// semaphore's waits are granted as permits come free.
TEST(EtcdAsync, ATryOrACancelLeavesNoKeyAndASemaphoresWaitIsGrantedWhenPermitsFree) {
  AsyncOutcome tried;      // before the Clients, whose waits tell it
  AsyncOutcome cancelled;  // before the Clients, whose waits tell it
  AsyncOutcome permits;    // before the Clients, whose waits tell it
  EtcdCluster cluster;
  Client client = Client::open(cluster.uri());
  Client other = Client::open(cluster.uri());

  Lease held = other.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AcquireHandle a =
      client.lock("g", "y").acquire_async(Mode::exclusive, Wait::none(), tried.callback());
  ASSERT_TRUE(tried.wait_for(kPatience));
  EXPECT_FALSE(tried.granted());
  EXPECT_EQ(tried.error(), nullptr);
  EXPECT_TRUE(eventually([&] { return requests(cluster, "g", "y") == 1; }))
      << "a try left its key:" << describe(lock_keys(cluster, "g", "y"));

  AcquireHandle b = client.lock("g", "y").acquire_async(
      Mode::exclusive, Wait::up_to(kLongDeadline), cancelled.callback());
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "y") == 2; }, kPatience));
  b.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience));
  EXPECT_FALSE(cancelled.granted());
  EXPECT_EQ(cancelled.error(), nullptr);
  EXPECT_TRUE(eventually([&] { return requests(cluster, "g", "y") == 1; }))
      << "a cancelled wait left its key:" << describe(lock_keys(cluster, "g", "y"));

  Semaphore full = other.semaphore("g", "s", 2);
  Lease two = full.acquire(2, Wait::none());
  ASSERT_TRUE(two);
  AcquireHandle c = client.semaphore("g", "s", 2).acquire_async(1, Wait::up_to(kLongDeadline),
                                                               permits.callback());
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "s") == 2; }, kPatience));
  EXPECT_EQ(permits.calls(), 0) << "granted while every permit was held";
  two.release();
  EXPECT_TRUE(permits.told_granted(kPatience));
  held.release();
  EXPECT_TRUE(no_warden_keys(cluster, kPatience)) << describe(warden_keys(cluster));
}

// Three members, the waiting Client's calls on member 0, which freezes (SIGSTOP) while
// its waits are queued: their watches were on its stream and say nothing more, so the
// waits' polls find member 0 unanswering, move to another member, watch there, and are
// granted in turn once the holder (on another member) releases.
TEST(EtcdAsync, WaitsLeaveAFrozenMemberAndAreGrantedInTurn) {
  AsyncOutcome first, second;  // before the Clients, whose waits tell them
  EtcdCluster cluster(EtcdOptions{3, {}});
  // A short op_timeout, so that a call to the frozen member is given up soon.
  const ClientOptions options = with_ttl(5s, 1s);
  Client holder = Client::open(uri_starting_at(cluster, 1), options);
  Client client = Client::open(uri_starting_at(cluster, 0), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = client.lock("g", "x");
  AcquireHandle a =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "x") == 2; }, kPatience));
  AcquireHandle b =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), second.callback());
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "x") == 3; }, kPatience));

  cluster.pause(0);
  std::this_thread::sleep_for(2s);  // the polls have met the frozen member
  held.release();
  EXPECT_TRUE(first.told_granted(kPatience)) << "the first in line, with member 0 frozen";
  EXPECT_TRUE(second.told_granted(kPatience)) << "the second in line, with member 0 frozen";
  cluster.resume(0);
  EXPECT_TRUE(no_warden_keys(cluster, kPatience)) << describe(warden_keys(cluster));
}

// The waiting Client's session lease revoked behind its back (an operator's etcdctl):
// the waits' keys go with it, and the waits queue again on a new session, which one thread
// of the Client's grants for all of them; all are granted once the holder releases.
TEST(EtcdAsync, WaitsWhoseSessionWasRevokedQueueAgainOnANewOne) {
  GrantOrder order;  // before the Clients, whose waits it is told of
  constexpr int kWaits = 20;
  EtcdCluster cluster;
  Client holder = Client::open(cluster.uri());
  Client client = Client::open(cluster.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::string holder_session = lease_of_lock(cluster, "x");
  Lock lock = client.lock("g", "x");
  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
  }
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "x") == kWaits + 1; }, kPatience));
  std::string session;
  for (const std::string& key : lock_keys(cluster, "g", "x")) {
    const std::string lease = lease_of(cluster, key);
    if (lease != holder_session) session = lease;
  }
  ASSERT_FALSE(session.empty()) << "no waiting key found";

  cluster.etcdctl({"lease", "revoke", session});
  // Queued again, on another lease.
  ASSERT_TRUE(eventually(
      [&] {
        const auto keys = lock_keys(cluster, "g", "x");
        if (keys.size() != kWaits + 1) return false;
        for (const std::string& key : keys) {
          if (lease_of(cluster, key) == session) return false;
        }
        return true;
      },
      kPatience))
      << "the waits did not queue again:" << describe(lock_keys(cluster, "g", "x"));
  EXPECT_EQ(order.told(), 0u) << "a wait ended with its session";

  held.release();
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }, kLongDeadline))
      << order.told() << " of " << kWaits << " told";
  EXPECT_TRUE(order.tokens_rising()) << "granted out of the queue's order";
  EXPECT_TRUE(no_warden_keys(cluster, kPatience)) << describe(warden_keys(cluster));
}

// The member killed before the Client has a session: the engine's one session thread's
// lease grant fails, and every wait that asked for that session is told its error (as the
// blocking acquire's grant throws), once, rather than waiting on; the Client then closes.
TEST(EtcdAsync, WaitsWhoseSessionCannotBeGrantedAreToldTheError) {
  AsyncOutcome first, second;  // before the Clients, whose waits tell them
  EtcdCluster cluster;
  std::optional<Client> client = Client::open(cluster.uri(), with_ttl(5s, 1s));
  cluster.kill9(0);
  AcquireHandle a = client->lock("g", "x").acquire_async(
      Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  AcquireHandle b = client->lock("g", "y").acquire_async(
      Mode::exclusive, Wait::up_to(kLongDeadline), second.callback());
  EXPECT_TRUE(first.told_error(Errc::unavailable, kPatience));
  EXPECT_TRUE(second.told_error(Errc::unavailable, kPatience));
  client.reset();  // closes: nothing waits on the dead member past its bound
}

// A Client's requests of one lock reuse a few key names (engines/etcd/request_slots.h):
// the smallest slot not in use, given back once its key is gone. Two requests at once
// (a held lock and a wait of the same Client) take two names; after both, the next
// request takes the first name again.
TEST(EtcdAsync, ARequestTakesTheSmallestKeyNameNotInUse) {
  AsyncOutcome waited;  // before the Client, whose wait tells it
  EtcdCluster cluster;
  Client client = Client::open(cluster.uri());
  Lock lock = client.lock("g", "x");
  const auto only_key = [&] {
    const auto keys = lock_keys(cluster, "g", "x");
    return keys.size() == 1 ? keys.front() : "(" + std::to_string(keys.size()) + " keys)";
  };

  Lease held = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::string first = only_key();
  AcquireHandle handle =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), waited.callback());
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "x") == 2; }, kPatience));
  std::string second;
  for (const std::string& key : lock_keys(cluster, "g", "x")) {
    if (key != first) second = key;
  }
  EXPECT_NE(second, "") << describe(lock_keys(cluster, "g", "x"));

  held.release();
  ASSERT_TRUE(waited.wait_for(kPatience));
  ASSERT_TRUE(waited.granted()) << to_string(waited.error_code());
  // The released key's delete may still be under way.
  EXPECT_TRUE(eventually([&] { return only_key() == second; }, kPatience))
      << "the wait was granted under another name than " << second << ":"
      << describe(lock_keys(cluster, "g", "x"));
  waited.take().release();
  ASSERT_TRUE(no_warden_keys(cluster, kPatience)) << describe(warden_keys(cluster));

  for (int i = 0; i < 3; ++i) {
    Lease again = lock.acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(again);
    EXPECT_EQ(only_key(), first) << "round " << i << ": the first name was not taken again";
    again.release();
  }
}

}  // namespace
}  // namespace warden::testing
