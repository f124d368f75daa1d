// redis+sentinel:// against a real master, replicas and sentinels on loopback
// (support/redis_sentinel.h): the engine finds the master from the sentinels, follows a
// failover — asked for, or after kill -9 of the master — with holders keeping replicated
// grants and waiters queueing again at the new master, reports a grant the new master
// lacks lost at once, and with min_replicas gives back a grant too few replicas have.
// Bad input (an unknown master name, every sentinel down) is a clear `unavailable`.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/async_outcome.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"
#include "support/waiting.h"
#include "test_util.h"
#include "warden/async.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

// A lock "x" held (TTL 10 s) by one client and waited for (up to 60 s) by another.
struct HeldAndAwaited {
  explicit HeldAndAwaited(const RedisSentinelGroup& group)
      : holder_client(Client::open(group.uri())), waiter_client(Client::open(group.uri())) {
    held = holder_client.lock("g", "x", ttl(10s)).acquire(Mode::exclusive, Wait::none());
    waiter = std::async(std::launch::async, [this] {
      return waiter_client.lock("g", "x", ttl(10s)).acquire(Mode::exclusive, Wait::up_to(60s));
    });
  }
  Client holder_client;
  Client waiter_client;
  Lease held;
  std::future<Lease> waiter;
};

// What an asynchronous acquire was told, for a failure message.
std::string error_text(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception of another kind";
  }
}

// The port of a data server that is not the master (0 if none is).
std::uint16_t a_replica(RedisSentinelGroup& group) {
  for (const std::uint16_t port : group.data_ports()) {
    if (port != group.master_port()) return port;
  }
  return 0;
}

// true once a grant reached enough replicas for `client` (its min_replicas), within 30 s:
// the replicas are in sync before a test freezes one.
bool replicas_in_sync(Client& client) {
  return eventually(
      [&] {
        try {
          return client.lock("g", "warm").acquire(Mode::exclusive, Wait::none()).valid();
        } catch (const Error&) {
          return false;
        }
      },
      30s);
}

// The grant's keys, as the master at `port` has them.
bool has_grant(RedisSentinelGroup& group, std::uint16_t port, const std::string& name) {
  return group.command(port, {"EXISTS", lock_tag("g", name) + ":i"}) == "1";
}

TEST(RedisSentinel, LocksOnTheMasterTheSentinelsNameAndRefusesAnUnknownMasterName) {
  RedisSentinelGroup group({.replicas = 1, .sentinels = 1});
  Client client = Client::open(group.uri());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_TRUE(has_grant(group, group.master_port(), "x"));

  std::string message;
  const std::string unknown =
      "redis+sentinel://127.0.0.1:" + std::to_string(group.sentinel_ports().front()) +
      "/nosuchmaster";
  EXPECT_EQ(open_error(unknown, &message), Errc::unavailable);
  EXPECT_NE(message.find("does not know the master name"), std::string::npos) << message;
  EXPECT_NE(message.find("nosuchmaster"), std::string::npos) << message;

  // A data node is no sentinel: it does not know the command.
  const std::string not_a_sentinel =
      "redis+sentinel://127.0.0.1:" + std::to_string(group.master_port()) + "/wmaster";
  EXPECT_EQ(open_error(not_a_sentinel, &message), Errc::unavailable);
  EXPECT_NE(message.find("SENTINEL"), std::string::npos) << message;
}

TEST(RedisSentinel, WithEverySentinelDownOpenIsUnavailableUntilOneIsBack) {
  RedisSentinelGroup group({.replicas = 1, .sentinels = 2});
  group.kill_sentinels();
  std::string message;
  EXPECT_EQ(open_error(group.uri(), &message), Errc::unavailable);
  for (const std::uint16_t port : group.sentinel_ports()) {
    EXPECT_NE(message.find(std::to_string(port)), std::string::npos) << message;
  }
  group.start_sentinels();
  ASSERT_TRUE(eventually([&] { return open_error(group.uri(), &message) == Errc::internal; }, 30s))
      << message;
}

TEST(RedisSentinel, AHolderKeepsItsLockThroughAFailoverAndTheWaiterGetsItOnTheNewMaster) {
  RedisSentinelGroup group;
  HeldAndAwaited scene(group);
  Client& holder_client = scene.holder_client;
  Lease& held = scene.held;
  std::future<Lease>& waiter = scene.waiter;
  ASSERT_TRUE(held);
  ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout);

  const std::uint16_t old_master = group.master_port();
  const std::uint16_t new_master = group.failover();
  ASSERT_NE(new_master, old_master);
  // Replicated before the switch, renewed on the new master after it.
  ASSERT_TRUE(eventually([&] { return has_grant(group, new_master, "x"); }, 30s));
  std::this_thread::sleep_for(4s);  // more than a renewal interval (TTL/3) on the new master
  EXPECT_FALSE(held.lost());
  EXPECT_TRUE(holder_client.check(held.sequencer()));
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout) << "the waiter overtook the holder";

  const std::uint64_t token = held.token();
  held.release();
  ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
  Lease next = waiter.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  EXPECT_TRUE(has_grant(group, new_master, "x"));
}

TEST(RedisSentinel, AfterTheMasterIsKilledAReplicaTakesOverAndLocksGoOn) {
  RedisSentinelGroup group;
  HeldAndAwaited scene(group);
  Client& holder_client = scene.holder_client;
  Lease& held = scene.held;
  std::future<Lease>& waiter = scene.waiter;
  ASSERT_TRUE(held);
  ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout);

  const std::uint16_t old_master = group.kill_master();
  const std::uint16_t new_master = group.wait_for_new_master(old_master);
  ASSERT_TRUE(eventually([&] { return holder_client.check(held.sequencer()); }, 30s));
  EXPECT_FALSE(held.lost());
  held.release();
  ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
  Lease next = waiter.get();
  ASSERT_TRUE(next);
  EXPECT_TRUE(has_grant(group, new_master, "x"));

  // The old master comes back as a replica; locks keep working on the new one.
  group.restart_node(old_master);
  next.release();
  EXPECT_TRUE(holder_client.lock("g", "y").acquire(Mode::exclusive, Wait::none()));
}

// The same with an asynchronous waiter (engines/redis/async_waits.h): its connection to
// the killed master breaks, and it asks again, on the master the sentinels name next,
// until it is granted there.
TEST(RedisSentinel, AnAsyncWaiterOutlivesTheMastersKillAndGetsTheLockOnTheNewOne) {
  RedisSentinelGroup group;
  Client holder_client = Client::open(group.uri());
  Client waiter_client = Client::open(group.uri());
  Lease held = holder_client.lock("g", "x", ttl(10s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AsyncOutcome waiter;
  AcquireHandle handle = waiter_client.lock("g", "x", ttl(10s))
                             .acquire_async(Mode::exclusive, Wait::up_to(60s), waiter.callback());
  ASSERT_FALSE(waiter.wait_for(300ms)) << "granted while held";

  const std::uint16_t old_master = group.kill_master();
  const std::uint16_t new_master = group.wait_for_new_master(old_master);
  ASSERT_TRUE(eventually([&] { return holder_client.check(held.sequencer()); }, 30s));
  EXPECT_EQ(waiter.calls(), 0) << "the waiter overtook the holder";
  held.release();
  ASSERT_TRUE(waiter.wait_for(30s)) << "the waiter was not told after the failover";
  EXPECT_EQ(waiter.error(), nullptr);
  EXPECT_TRUE(waiter.granted());
  EXPECT_TRUE(has_grant(group, new_master, "x"));
  EXPECT_EQ(waiter.calls(), 1);
  waiter.take();
}

TEST(RedisSentinel, AGrantTheNewMasterLacksIsReportedLostAtTheSwitchNotAtTheNextRenewal) {
  RedisSentinelGroup group;
  Client client = Client::open(group.uri());
  // Renewed every 40 s: any loss seen sooner comes from the check after the switch.
  Lease held = client.lock("g", "x", ttl(120s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  // Gone behind the engine's back, on the master and (replicated) on every replica: as
  // a grant would be that never reached the replica promoted next.
  const std::string tag = lock_tag("g", "x");
  group.command(group.master_port(), {"DEL", tag + ":h", tag + ":i", tag + ":q", tag + ":w"});
  EXPECT_FALSE(held.lost());
  group.failover();
  EXPECT_TRUE(eventually([&] { return held.lost(); }, 25s));
}

TEST(RedisSentinel, MinReplicasGrantsWhatEnoughReplicasHaveAndGivesBackTheRest) {
  RedisSentinelGroup group({.replicas = 1, .sentinels = 1});
  const std::uint16_t replica = a_replica(group);
  {
    // A generous replica timeout: on a loaded machine the replica may take longer than
    // the default to acknowledge, and this half is about what it has once it did.
    Client client = Client::open(group.uri("min_replicas=1&replica_timeout_ms=5000"));
    Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    // WAIT 1 came back with the grant: the replica has it already.
    EXPECT_EQ(group.command(replica, {"EXISTS", lock_tag("g", "x") + ":i"}), "1");
  }
  Client client = Client::open(group.uri("min_replicas=2&replica_timeout_ms=100"));
  try {
    Lease granted = client.lock("g", "y").acquire(Mode::exclusive, Wait::none());
    (void)granted;
    ADD_FAILURE() << "granted with 1 of 2 replicas";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unavailable);
    EXPECT_NE(std::string(e.what()).find("1 of the 2 replicas"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(client.inspect("g", "y").holders.empty()) << "the grant was not given back";
}

// With min_replicas, asynchronous waits wait without a thread each too (a WAIT follows
// each grant on the waits' connection): 20 waits on one lock take at most two threads
// more, each is granted once, and every grant was on the replica before it was told.
TEST(RedisSentinel, MinReplicasAsyncWaitsTakeNoThreadEachAndAreToldOnlyReplicatedGrants) {
  RedisSentinelGroup group({.replicas = 1, .sentinels = 1});
  const std::uint16_t replica = a_replica(group);
  constexpr int kWaits = 20;
  std::mutex mu;
  int told = 0;
  int replicated = 0;
  std::vector<std::string> errors;
  AsyncOutcome first;  // these before the Clients, whose waits tell them
  const std::string uri = group.uri("min_replicas=1&replica_timeout_ms=5000");
  Client holder = Client::open(uri);
  Client client = Client::open(uri);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = client.lock("g", "x");
  AcquireHandle first_handle =
      lock.acquire_async(Mode::exclusive, Wait::up_to(60s), first.callback());
  ASSERT_TRUE(eventually([&] { return client.inspect("g", "x").waiters.size() == 1; }, 30s));
  const int threads_before = threads_now();
  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(lock.acquire_async(
        Mode::exclusive, Wait::up_to(60s), [&](std::exception_ptr error, Lease lease) {
          // Told on the Client's thread, the grant's WAIT answered: the replica has it.
          const bool on_replica = lease && has_grant(group, replica, "x");
          std::lock_guard guard(mu);
          ++told;
          if (on_replica) ++replicated;
          if (error) errors.push_back(error_text(error));
          if (lease) lease.release();
        }));
  }
  ASSERT_TRUE(
      eventually([&] { return client.inspect("g", "x").waiters.size() == kWaits + 1; }, 30s));
  EXPECT_LE(threads_now(), threads_before + 2) << "the waits took threads of their own";
  held.release();
  ASSERT_TRUE(first.told_granted(30s));
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard guard(mu);
        return told == kWaits;
      },
      60s));
  std::lock_guard guard(mu);
  EXPECT_TRUE(errors.empty()) << errors.size() << " waits told an error, the first: "
                              << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(replicated, kWaits) << "a grant was told before the replica had it";
}

// A grant too few replicas acknowledge is given back on the asynchronous path as on the
// blocking one: a try is told `unavailable` at once, a wait at its deadline (it asks
// again meanwhile, as replicas may catch up), and neither leaves a holder or a waiter.
TEST(RedisSentinel, MinReplicasAsyncGivesBackAGrantTooFewReplicasHave) {
  RedisSentinelGroup group({.replicas = 1, .sentinels = 1});
  AsyncOutcome tried, waited;  // before the Client, whose waits tell them
  Client client = Client::open(group.uri("min_replicas=2&replica_timeout_ms=100"));
  AcquireHandle try_handle =
      client.lock("g", "x").acquire_async(Mode::exclusive, Wait::none(), tried.callback());
  ASSERT_TRUE(tried.told_error(Errc::unavailable, 30s));
  try {
    std::rethrow_exception(tried.error());
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("of the 2 replicas"), std::string::npos) << e.what();
  }
  AcquireHandle wait_handle =
      client.lock("g", "y").acquire_async(Mode::exclusive, Wait::up_to(2s), waited.callback());
  EXPECT_FALSE(waited.wait_for(1s)) << "told before its deadline";
  ASSERT_TRUE(waited.told_error(Errc::unavailable, 30s));
  for (const char* name : {"x", "y"}) {
    EXPECT_TRUE(eventually(
        [&] {
          const auto status = client.inspect("g", name);
          return status.holders.empty() && status.waiters.empty();
        },
        10s))
        << name << ": the grant or the wait was left behind";
  }
}

// A replica that freezes (SIGSTOP) rather than dies: WAIT comes back after its timeout
// with no acknowledgement, and the grant is given back on the blocking path and on the
// asynchronous one alike (a try at once, a wait at its deadline), leaving nothing; once
// the replica is back, grants are told again.
TEST(RedisSentinel, MinReplicasWithTheReplicaFrozenGivesEveryGrantBackOnBothPaths) {
  RedisSentinelGroup group({.replicas = 1, .sentinels = 1});
  const std::uint16_t replica = a_replica(group);
  AsyncOutcome waited, after;  // before the Client, whose waits tell them
  Client client = Client::open(group.uri("min_replicas=1&replica_timeout_ms=200"));
  ASSERT_TRUE(replicas_in_sync(client));

  group.pause_node(replica);
  try {
    Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    ADD_FAILURE() << "the blocking try was granted with the replica frozen";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("0 of the 1 replicas"), std::string::npos) << e.what();
  }
  AcquireHandle handle =
      client.lock("g", "y").acquire_async(Mode::exclusive, Wait::up_to(1500ms), waited.callback());
  EXPECT_TRUE(waited.told_error(Errc::unavailable, 30s));
  for (const char* name : {"x", "y"}) {
    const auto status = client.inspect("g", name);
    EXPECT_TRUE(status.holders.empty() && status.waiters.empty())
        << name << ": the grant or the wait was left behind";
  }

  group.resume_node(replica);
  AcquireHandle again =
      client.lock("g", "y").acquire_async(Mode::exclusive, Wait::up_to(30s), after.callback());
  EXPECT_TRUE(after.told_granted(30s)) << "no grant once the replica was back";
}

// A connection closed (CLIENT KILL) while the WAIT behind an asynchronous wait's grant
// waits on a frozen replica: the wait gives that grant back before it asks again on a
// new connection, and is granted once the replica is back. Were the grant kept, the
// wait's next attempt would find the lock held by its own unconfirmed grant and wait
// behind it until the grant's TTL, past the wait's deadline.
TEST(RedisSentinel, MinReplicasAsyncWaitWhoseConnectionClosesDuringTheWaitGivesBackAndIsGranted) {
  RedisSentinelGroup group({.replicas = 1, .sentinels = 1});
  const std::uint16_t replica = a_replica(group);
  AsyncOutcome waited;  // before the Client, whose waits tell it
  Client client = Client::open(group.uri("min_replicas=1&replica_timeout_ms=8000"));
  ASSERT_TRUE(replicas_in_sync(client));

  group.pause_node(replica);
  AcquireHandle handle = client.lock("g", "x", ttl(120s))
                             .acquire_async(Mode::exclusive, Wait::up_to(30s), waited.callback());
  // Granted on the master; its WAIT now waits up to 8 s for the frozen replica.
  ASSERT_TRUE(eventually([&] { return has_grant(group, group.master_port(), "x"); }, 30s));
  EXPECT_NE(group.command(group.master_port(), {"CLIENT", "KILL", "TYPE", "normal"}), "0");
  group.resume_node(replica);
  ASSERT_TRUE(waited.told_granted(45s)) << "the wait's own unconfirmed grant was kept";
  // Given back by told_granted: nothing is left, the unconfirmed grant neither.
  EXPECT_TRUE(eventually(
      [&] {
        const auto status = client.inspect("g", "x");
        return status.holders.empty() && status.waiters.empty();
      },
      10s))
      << "a grant or the wait was left behind";
}

}  // namespace
}  // namespace warden::testing
