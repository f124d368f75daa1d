// redis+cluster:// against a real Redis Cluster on loopback (support/redis_cluster.h):
// the engine learns the cluster from one node and puts each lock on its slot's master;
// a lock keeps working while its slot is moved to another master (MOVED) and while the
// move is half done (TRYAGAIN / ASK, waited out); a master killed and replaced by its
// replica stalls only its own slots, while the other masters' grants are renewed on;
// waiters hear wake-ups on their lock's master (sharded pub/sub), and so does a cached
// lock's revoke watch, also after its slot moved. Bad input (a node not
// in cluster mode, every node down, a database, min_replicas) is a clear error.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_cluster.h"
#include "support/redis_server.h"
#include "support/waiting.h"
#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

int slot_of(RedisClusterGroup& cluster, const std::string& name) {
  return std::stoi(cluster.command(cluster.node_ports().front(),
                                   {"CLUSTER", "KEYSLOT", lock_tag("g", name) + ":i"}));
}

// The master of the slot of lock ("g", name), as the cluster sees it now.
std::uint16_t master_of(RedisClusterGroup& cluster, const std::string& name) {
  return cluster.master_port_for_slot(slot_of(cluster, name));
}

bool has_grant(RedisClusterGroup& cluster, std::uint16_t port, const std::string& name) {
  return cluster.command(port, {"EXISTS", lock_tag("g", name) + ":i"}) == "1";
}

// The same on a replica, which answers reads of its master's slots after READONLY.
bool replica_has_grant(RedisClusterGroup& cluster, std::uint16_t port, const std::string& name) {
  return cluster.commands(port, {{"READONLY"}, {"EXISTS", lock_tag("g", name) + ":i"}}).back() ==
         "1";
}

// A name other than `not_name` whose lock lives in `slot`.
std::string name_in_slot(RedisClusterGroup& cluster, int slot, const std::string& not_name) {
  for (int i = 0; i < 200'000; ++i) {
    const std::string name = "n" + std::to_string(i);
    if (name != not_name && slot_of(cluster, name) == slot) return name;
  }
  throw std::runtime_error("no name found in slot " + std::to_string(slot));
}

// A name whose lock lives on a master other than `port`.
std::string name_off(RedisClusterGroup& cluster, std::uint16_t port) {
  for (int i = 0;; ++i) {
    const std::string name = "o" + std::to_string(i);
    if (master_of(cluster, name) != port) return name;
  }
}

std::uint16_t other_master(RedisClusterGroup& cluster, std::uint16_t port) {
  for (const std::uint16_t m : cluster.master_ports()) {
    if (m != port) return m;
  }
  throw std::runtime_error("no other master");
}

// One cluster of 3 masters (no replicas) for the tests that kill nothing.
class RedisClusterShared : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new RedisClusterGroup({.replicas_per_master = 0}); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static RedisClusterGroup* cluster_;
};
RedisClusterGroup* RedisClusterShared::cluster_ = nullptr;

TEST_F(RedisClusterShared, LocksLandOnTheirSlotsMastersFoundFromOneNode) {
  RedisClusterGroup& cluster = *cluster_;
  // One seed: the engine learns the other masters from it.
  const std::string seed =
      "redis+cluster://127.0.0.1:" + std::to_string(cluster.node_ports().back());
  Client client = Client::open(seed);
  std::vector<Lease> leases;
  std::set<std::uint16_t> masters;
  for (int i = 0; i < 30; ++i) {
    const std::string name = "spread" + std::to_string(i);
    leases.push_back(client.lock("g", name).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(leases.back());
    const std::uint16_t master = master_of(cluster, name);
    EXPECT_TRUE(has_grant(cluster, master, name)) << name << " not on its master " << master;
    masters.insert(master);
    EXPECT_TRUE(client.check(leases.back().sequencer()));
  }
  EXPECT_EQ(masters.size(), 3u) << "30 locks all on fewer than 3 masters";
  // A group's locks are listed from every master.
  EXPECT_EQ(client.list("g").size(), 30u);
  leases.clear();
  for (int i = 0; i < 30; ++i) {
    const std::string name = "spread" + std::to_string(i);
    EXPECT_FALSE(has_grant(cluster, master_of(cluster, name), name)) << name << " left behind";
  }
}

TEST_F(RedisClusterShared, AWaiterListensOnItsLocksMasterAndIsGrantedOnRelease) {
  RedisClusterGroup& cluster = *cluster_;
  Client holder_client = Client::open(cluster.uri());
  Client waiter_client = Client::open(cluster.uri());
  Lease held = holder_client.lock("g", "w").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiter = std::async(std::launch::async, [&] {
    return waiter_client.lock("g", "w").acquire(Mode::exclusive, Wait::up_to(60s));
  });
  const std::uint16_t master = master_of(cluster, "w");
  const std::string channel = lock_tag("g", "w") + ":c";
  ASSERT_TRUE(eventually([&] {
    return cluster.command(master, {"PUBSUB", "SHARDCHANNELS"}).find(channel) != std::string::npos;
  })) << "the waiter never subscribed on the lock's master";
  ASSERT_EQ(waiter.wait_for(0s), std::future_status::timeout);
  const std::uint64_t token = held.token();
  held.release();
  ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
  Lease next = waiter.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
}

TEST_F(RedisClusterShared, ASlotMovedWhileItsLockIsHeldAndAwaitedKeepsBoth) {
  RedisClusterGroup& cluster = *cluster_;
  Client holder_client = Client::open(cluster.uri());
  Client waiter_client = Client::open(cluster.uri());
  // TTL 2 s, held past it after the move: renewals must reach the new master.
  Lease held = holder_client.lock("g", "m", ttl(2s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiter = std::async(std::launch::async, [&] {
    return waiter_client.lock("g", "m", ttl(2s)).acquire(Mode::exclusive, Wait::up_to(60s));
  });
  ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout);

  const int slot = slot_of(cluster, "m");
  const std::uint16_t from = cluster.master_port_for_slot(slot);
  const std::uint16_t to = other_master(cluster, from);
  cluster.migrate_slot(slot, to);
  ASSERT_TRUE(has_grant(cluster, to, "m"));
  std::this_thread::sleep_for(5s);  // more than two TTLs
  EXPECT_FALSE(held.lost());
  EXPECT_TRUE(holder_client.check(held.sequencer()));
  EXPECT_EQ(holder_client.inspect("g", "m").holders.size(), 1u);
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout) << "the waiter overtook the holder";

  held.release();
  ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
  Lease next = waiter.get();
  ASSERT_TRUE(next);
  EXPECT_TRUE(has_grant(cluster, to, "m"));
  EXPECT_FALSE(has_grant(cluster, from, "m"));
}

TEST_F(RedisClusterShared, ACachedLockWhoseSlotMovedIsStillGivenBackToAWaiter) {
  RedisClusterGroup& cluster = *cluster_;
  ClientOptions caching = quick_options(2000ms);
  caching.cache_idle = std::chrono::hours(1);  // only a revoke gives the lock back in time
  Client holder_client = Client::open(cluster.uri(), caching);
  Client waiter_client = Client::open(cluster.uri());
  // A 60 s lease: renewed every 20 s, so no renewal in this test meets the move for it.
  LockOptions cached = ttl(60s);
  cached.cache = true;
  { Lease lease = holder_client.lock("g", "cm", cached).acquire(Mode::exclusive, Wait::none()); }
  const int slot = slot_of(cluster, "cm");
  const std::uint16_t from = cluster.master_port_for_slot(slot);
  const std::uint16_t to = other_master(cluster, from);
  ASSERT_TRUE(has_grant(cluster, from, "cm")) << "the released lock was not kept cached";
  const std::string channel = lock_tag("g", "cm") + ":c";
  ASSERT_TRUE(eventually([&] {
    return cluster.command(from, {"PUBSUB", "SHARDCHANNELS"}).find(channel) != std::string::npos;
  })) << "the holder's revoke watch never listened on the lock's master";
  // The holder's revoke watch listens on `from`, which hears nothing of `to`'s requests:
  // it has to notice the move (Redis unsubscribes it) and look at the lock on `to`.
  cluster.migrate_slot(slot, to);
  ASSERT_TRUE(has_grant(cluster, to, "cm"));
  Lease next = waiter_client.lock("g", "cm").acquire(Mode::exclusive, Wait::up_to(10s));
  ASSERT_TRUE(next) << "the cached lock was not given back after its slot moved";
  EXPECT_TRUE(has_grant(cluster, to, "cm"));
  const std::string metrics = holder_client.metrics_text();
  EXPECT_NE(metrics.find("warden_cache_revokes_total{group=\"g\"} 1"), std::string::npos)
      << metrics;
}

TEST_F(RedisClusterShared, CallsInAHalfMovedSlotWaitForTheMoveAndOtherSlotsDoNot) {
  RedisClusterGroup& cluster = *cluster_;
  Client client = Client::open(cluster.uri());
  Lease held = client.lock("g", "h").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const int slot = slot_of(cluster, "h");
  const std::uint16_t from = cluster.master_port_for_slot(slot);
  const std::uint16_t to = other_master(cluster, from);
  const std::string fresh = name_in_slot(cluster, slot, "h");
  const std::string elsewhere = name_off(cluster, from);

  cluster.begin_migration(slot, to);
  // A lock of another master is not held up by the migration.
  EXPECT_TRUE(client.lock("g", elsewhere).acquire(Mode::exclusive, Wait::none()));
  // In the half-moved slot, a fresh lock (its keys on neither side) and the held lock's
  // check are answered TRYAGAIN or ASK until the move ends: they wait for it.
  auto fresh_acquire = std::async(std::launch::async, [&] {
    return client.lock("g", fresh).acquire(Mode::exclusive, Wait::none());
  });
  auto check = std::async(std::launch::async, [&] { return client.check(held.sequencer()); });
  std::this_thread::sleep_for(300ms);
  cluster.finish_migration(slot, to);

  ASSERT_EQ(fresh_acquire.wait_for(30s), std::future_status::ready);
  Lease fresh_lease = fresh_acquire.get();
  ASSERT_TRUE(fresh_lease);
  ASSERT_EQ(check.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(check.get());
  EXPECT_TRUE(has_grant(cluster, to, fresh));
  EXPECT_TRUE(has_grant(cluster, to, "h"));
  held.release();
  EXPECT_FALSE(has_grant(cluster, to, "h"));
}

TEST(RedisCluster, AKilledMasterStallsOnlyItsSlotsUntilItsReplicaTakesOver) {
  RedisClusterGroup cluster;  // 3 masters with a replica each
  Client holder_client = Client::open(cluster.uri());
  Client waiter_client = Client::open(cluster.uri());
  Lease held = holder_client.lock("g", "k", ttl(10s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint16_t doomed = master_of(cluster, "k");
  // Held elsewhere with a TTL shorter than the failover: its renewals must go on while
  // the doomed master is gone.
  const std::string bystander = name_off(cluster, doomed);
  Lease other = holder_client.lock("g", bystander, ttl(2s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(other);
  auto waiter = std::async(std::launch::async, [&] {
    return waiter_client.lock("g", "k", ttl(10s)).acquire(Mode::exclusive, Wait::up_to(90s));
  });
  ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout);
  // The grant is on the replica before the kill (replication is asynchronous).
  const std::vector<std::uint16_t> replicas = cluster.replica_ports_of(doomed);
  ASSERT_FALSE(replicas.empty());
  ASSERT_TRUE(eventually([&] {
    for (const std::uint16_t r : replicas) {
      if (!replica_has_grant(cluster, r, "k")) return false;
    }
    return true;
  }));

  cluster.kill_node(doomed);
  const std::uint16_t promoted = cluster.wait_for_failover(doomed);
  ASSERT_NE(promoted, doomed);
  // The holder either still holds on the promoted replica, or was told it lost: never
  // both silently.
  // (The first calls after the kill may still go to the dead master and fail
  // `unavailable`; each failure makes the engine read the slot map again.)
  const auto still_held = [&] {
    try {
      return holder_client.check(held.sequencer());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
      return false;
    }
  };
  ASSERT_TRUE(eventually([&] { return held.lost() || still_held(); }, 30s));
  std::this_thread::sleep_for(3s);  // more than the bystander's TTL, after the failover
  EXPECT_FALSE(other.lost()) << "a grant on a healthy master was lost while another was down";
  EXPECT_TRUE(holder_client.check(other.sequencer()));

  held.release();
  ASSERT_EQ(waiter.wait_for(60s), std::future_status::ready);
  Lease next = waiter.get();
  ASSERT_TRUE(next);
  EXPECT_TRUE(has_grant(cluster, promoted, "k"));
  next.release();
  EXPECT_TRUE(holder_client.lock("g", "k").acquire(Mode::exclusive, Wait::none()));
}

TEST(RedisCluster, BadInputIsAClearErrorAndConnectsNothing) {
  std::string message;
  {
    RedisServer plain;
    const std::string uri = "redis+cluster://127.0.0.1:" + std::to_string(plain.port());
    EXPECT_EQ(open_error(uri, &message), Errc::unavailable);
    EXPECT_NE(message.find("not in cluster mode"), std::string::npos) << message;
  }
  {
    const std::uint16_t a = free_port();
    const std::uint16_t b = free_port();
    const std::string uri =
        "redis+cluster://127.0.0.1:" + std::to_string(a) + ",127.0.0.1:" + std::to_string(b);
    EXPECT_EQ(open_error(uri, &message), Errc::unavailable);
    EXPECT_NE(message.find(std::to_string(a)), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(b)), std::string::npos) << message;
  }
  for (const std::string uri :
       {"redis+cluster://127.0.0.1:7000/3", "redis+cluster://127.0.0.1:7000?min_replicas=1",
        "redis+cluster://127.0.0.1:7000?replica_timeout_ms=5",
        "redis+cluster://127.0.0.1:7000?nosuch=1", "redis+cluster://"}) {
    EXPECT_EQ(open_error(uri, &message), Errc::invalid_argument) << uri << ": " << message;
  }
}

}  // namespace
}  // namespace warden::testing
