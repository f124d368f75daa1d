// RedisClusterGroup (support/redis_cluster.h) does to a real Redis Cluster what the
// redis+cluster:// tests will rely on: it comes up with every slot served, a slot moved
// by hand answers ASK while half-moved and MOVED afterwards, and a killed master is
// replaced by its replica. Checked with plain commands, as a cluster-unaware client
// sees them.
#include "support/redis_cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace warden::testing {
namespace {

// The slot the cluster computes for `key`.
int slot_of(RedisClusterGroup& cluster, const std::string& key) {
  return std::stoi(cluster.command(cluster.node_ports().front(), {"CLUSTER", "KEYSLOT", key}));
}

// A master other than `port`.
std::uint16_t other_master(RedisClusterGroup& cluster, std::uint16_t port) {
  for (const std::uint16_t m : cluster.master_ports()) {
    if (m != port) return m;
  }
  ADD_FAILURE() << "no master but " << port;
  return 0;
}

std::string moved(int slot, std::uint16_t port) {
  return "(error) MOVED " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(port);
}

std::string ask(int slot, std::uint16_t port) {
  return "(error) ASK " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(port);
}

TEST(RedisClusterGroup, ComesUpWithEverySlotServedByAMasterWithItsReplica) {
  RedisClusterGroup cluster;
  const std::vector<std::uint16_t> ports = cluster.node_ports();
  ASSERT_EQ(ports.size(), 6u);
  const std::string prefix = "redis+cluster://127.0.0.1:" + std::to_string(ports[0]) +
                             ",127.0.0.1:" + std::to_string(ports[1]) + ",";
  EXPECT_TRUE(cluster.uri("x=1").starts_with(prefix)) << cluster.uri();
  EXPECT_TRUE(cluster.uri("x=1").ends_with(std::to_string(ports[5]) + "?x=1")) << cluster.uri();

  const std::vector<std::uint16_t> masters = cluster.master_ports();
  ASSERT_EQ(masters.size(), 3u);
  for (const std::uint16_t m : masters) EXPECT_EQ(cluster.replica_ports_of(m).size(), 1u) << m;

  // Every node sees the whole slot space, in ranges that follow each other.
  for (const std::uint16_t port : ports) {
    int next = 0;
    for (const ClusterSlotRange& r : cluster.slot_table(port)) {
      EXPECT_EQ(r.first, next) << "node " << port;
      next = r.last + 1;
    }
    EXPECT_EQ(next, 16384) << "node " << port;
    EXPECT_EQ(cluster.node_id(port).size(), 40u);
  }
  EXPECT_TRUE(std::find(masters.begin(), masters.end(), cluster.master_port_for_slot(0)) !=
              masters.end());

  // A key is written on its slot's master; any other master redirects there.
  const int slot = slot_of(cluster, "foo");
  const std::uint16_t owner = cluster.master_port_for_slot(slot);
  EXPECT_EQ(cluster.command(owner, {"SET", "foo", "bar"}), "OK");
  EXPECT_EQ(cluster.command(other_master(cluster, owner), {"GET", "foo"}), moved(slot, owner));
}

TEST(RedisClusterGroup, AMigratedSlotIsServedByItsNewMaster) {
  RedisClusterGroup cluster;
  const int slot = slot_of(cluster, "foo");
  const std::uint16_t from = cluster.master_port_for_slot(slot);
  const std::uint16_t to = other_master(cluster, from);
  ASSERT_EQ(cluster.command(from, {"SET", "foo", "bar"}), "OK");
  ASSERT_EQ(cluster.command(from, {"SET", "{foo}.second", "2"}), "OK");

  cluster.begin_migration(slot, to);
  // Half-moved: the source serves the keys it still holds and sends the rest to the
  // target with ASK, which accepts them after ASKING (and only then).
  EXPECT_EQ(cluster.command(from, {"GET", "foo"}), "bar");
  EXPECT_EQ(cluster.command(from, {"GET", "{foo}.new"}), ask(slot, to));
  EXPECT_EQ(cluster.command(to, {"SET", "{foo}.new", "3"}), moved(slot, from));
  EXPECT_EQ(cluster.commands(to, {{"ASKING"}, {"SET", "{foo}.new", "3"}}),
            (std::vector<std::string>{"OK", "OK"}));
  EXPECT_EQ(cluster.master_port_for_slot(slot), from);

  cluster.finish_migration(slot, to);
  EXPECT_EQ(cluster.master_port_for_slot(slot), to);
  EXPECT_EQ(cluster.command(from, {"GET", "foo"}), moved(slot, to));
  EXPECT_EQ(cluster.command(to, {"GET", "foo"}), "bar");
  EXPECT_EQ(cluster.command(to, {"GET", "{foo}.second"}), "2");
  EXPECT_EQ(cluster.command(to, {"GET", "{foo}.new"}), "3");
  EXPECT_EQ(cluster.command(from, {"DBSIZE"}), "0");
  // The neighbouring slots stayed where they were.
  EXPECT_EQ(cluster.master_port_for_slot(slot == 0 ? 1 : slot - 1), from);

  // And back in one call.
  cluster.migrate_slot(slot, from);
  EXPECT_EQ(cluster.command(from, {"GET", "foo"}), "bar");
  EXPECT_EQ(cluster.command(to, {"GET", "foo"}), moved(slot, from));
}

TEST(RedisClusterGroup, AKilledMasterIsReplacedByItsReplica) {
  RedisClusterGroup cluster;
  const int slot = slot_of(cluster, "foo");
  const std::uint16_t old_master = cluster.master_port_for_slot(slot);
  const std::vector<std::uint16_t> replicas = cluster.replica_ports_of(old_master);
  ASSERT_EQ(replicas.size(), 1u);
  // The replica has the write before its master dies. WAIT counts acknowledgements of
  // the writes of its own connection, so it follows the SET on the same one.
  ASSERT_EQ(cluster.commands(old_master, {{"SET", "foo", "bar"}, {"WAIT", "1", "10000"}}),
            (std::vector<std::string>{"OK", "1"}));
  ASSERT_EQ(cluster.commands(replicas[0], {{"READONLY"}, {"GET", "foo"}}).back(), "bar");

  cluster.kill_node(old_master);
  EXPECT_FALSE(cluster.running(old_master));
  const std::uint16_t new_master = cluster.wait_for_failover(old_master);
  EXPECT_EQ(new_master, replicas[0]);
  EXPECT_EQ(cluster.master_port_for_slot(slot), new_master);
  EXPECT_EQ(cluster.command(new_master, {"GET", "foo"}), "bar");

  // The old master comes back as a replica of the one that replaced it.
  cluster.restart_node(old_master);
  EXPECT_EQ(cluster.master_port_for_slot(slot), new_master);
  EXPECT_EQ(cluster.replica_ports_of(new_master), (std::vector<std::uint16_t>{old_master}));
  EXPECT_EQ(cluster.command(old_master, {"GET", "foo"}), moved(slot, new_master));
}

}  // namespace
}  // namespace warden::testing
