// support/redis_cluster.h — a throwaway Redis Cluster on loopback for tests: N masters
// with M replicas each, every node a redis-server (7.0) of its own with a temp dir and
// two free ports (clients, cluster bus), joined by `redis-cli --cluster create`.
//
// Besides starting it, the group moves the cluster through what a cluster client must
// survive: a master killed and replaced by its replica (kill_node, wait_for_failover), a
// slot moved between masters by hand (migrate_slot, or begin_migration and
// finish_migration with the test acting while the slot is half-moved and its source
// answers ASK).
//
// It talks to the nodes with hiredis directly, never through warden, so a test can check
// warden against it. Every wait is bounded and throws std::runtime_error, with what it
// last saw, when its time runs out. Destruction kills every node by PID (SIGKILL) and
// removes the temp dirs. Not thread-safe: one thread uses a group at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/server_process.h"

namespace warden::testing {

struct RedisClusterOptions {
  // redis-cli refuses a cluster of fewer than 3 masters.
  int masters = 3;
  // Replicas of each master; 0 means a cluster that cannot fail over.
  int replicas_per_master = 1;
};

// One master's slots as a node sees them (CLUSTER SLOTS): first..last, served by the
// master on `master_port`, copied to the replicas listed (Redis lists only replicas
// that have reported a replication offset, so a fresh, idle cluster may list none:
// replica_ports_of() asks CLUSTER NODES instead).
struct ClusterSlotRange {
  int first = 0;
  int last = 0;
  std::uint16_t master_port = 0;
  std::vector<std::uint16_t> replica_ports;
  friend bool operator==(const ClusterSlotRange&, const ClusterSlotRange&) = default;
};

// One line of CLUSTER NODES: a node as another node sees it.
struct ClusterNodeLine {
  std::string id;
  std::uint16_t port = 0;
  std::string flags;      // "myself,master", "slave", "master,fail", ...
  std::string master_id;  // "-" for a master
};

class RedisClusterGroup {
 public:
  // Starts every node and creates the cluster; returns once wait_until_stable() holds.
  // Throws std::runtime_error (with the logs of what failed) if it does not come up.
  explicit RedisClusterGroup(RedisClusterOptions options = {});
  ~RedisClusterGroup();
  RedisClusterGroup(const RedisClusterGroup&) = delete;
  RedisClusterGroup& operator=(const RedisClusterGroup&) = delete;

  // "redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...[?QUERY]": every node, in the order
  // they were created (masters first, as redis-cli assigned them).
  std::string uri(std::string_view query = "") const;
  // Every node's client port, in the same order; killed nodes included.
  std::vector<std::uint16_t> node_ports() const;
  // The masters serving slots now, as a running node sees them, sorted.
  std::vector<std::uint16_t> master_ports();
  // The master serving `slot` (0..16383) as the first running node that answers sees it
  // (CLUSTER SLOTS). Throws std::runtime_error if no node answers or none serves it.
  std::uint16_t master_port_for_slot(int slot);
  // The replicas of the master on `master_port` that no node flags as failing, as the
  // first running node that answers sees them (CLUSTER NODES), sorted.
  std::vector<std::uint16_t> replica_ports_of(std::uint16_t master_port);
  // The whole slot table as the node on `port` sees it, sorted by first slot.
  std::vector<ClusterSlotRange> slot_table(std::uint16_t port);
  // Every node as the node on `port` sees it (CLUSTER NODES).
  std::vector<ClusterNodeLine> cluster_nodes(std::uint16_t port);

  // kill -9 the node on `port` (no shutdown, no save); it is gone when this returns.
  void kill_node(std::uint16_t port);
  // Starts the killed node again on the same ports and dir (its nodes.conf keeps its
  // identity; its data is gone), then waits until the cluster is stable with it.
  void restart_node(std::uint16_t port);
  bool running(std::uint16_t port);
  // SIGSTOP / SIGCONT of every node: the whole cluster frozen.
  void pause_all();
  void resume_all();

  // After kill_node(old_master_port): waits until a replica took over the slots that
  // master served and the cluster is stable without it; returns the new master's port.
  std::uint16_t wait_for_failover(std::uint16_t old_master_port,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Moves `slot` and its keys to the master on `to_port`: begin_migration, then
  // finish_migration.
  void migrate_slot(int slot, std::uint16_t to_port);
  // CLUSTER SETSLOT IMPORTING on the target, then MIGRATING on the slot's master: the
  // source keeps serving the keys it holds and answers ASK for the others.
  void begin_migration(int slot, std::uint16_t to_port);
  // MIGRATEs every key still in the slot on the source (CLUSTER GETKEYSINSLOT) to the
  // target, then CLUSTER SETSLOT NODE on the target, the source and every other master,
  // and waits until every running node routes the slot to the target. Precondition:
  // begin_migration(slot, to_port) came first.
  void finish_migration(int slot, std::uint16_t to_port);

  // Waits until every running node reports cluster_state:ok with all 16384 slots ok,
  // knows every node, flags no running node as failing, sees the same masters for every
  // slot (none of them a killed node) and every running node in the role it claims
  // itself, and every running replica's link to its master is up.
  void wait_until_stable(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Runs commands on one new connection to the node on `port`, in order; each reply as
  // text: status/bulk text, an integer in decimal, nil as "(nil)", an error as
  // "(error) ...", an array as its elements joined by '\n'. Throws std::runtime_error
  // if the node cannot be reached or does not answer within 5 s.
  std::vector<std::string> commands(std::uint16_t port,
                                    const std::vector<std::vector<std::string>>& commands);
  std::string command(std::uint16_t port, const std::vector<std::string>& args);

  // The node's cluster id (CLUSTER MYID), read once when the cluster was created.
  const std::string& node_id(std::uint16_t port) const;
  // The node's log, for failure messages.
  std::string log_text(std::uint16_t port) const;

 private:
  struct Node;

  Node& node(std::uint16_t port) const;
  void start_nodes();
  void create_cluster();
  // Why the cluster is not stable yet; nullopt once it is.
  std::optional<std::string> unstable();
  // The first running node that answers CLUSTER SLOTS, and its table.
  std::vector<ClusterSlotRange> any_slot_table();

  RedisClusterOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  // Slot ranges a node served when kill_node stopped it (by its port).
  std::map<std::uint16_t, std::vector<ClusterSlotRange>> served_when_killed_;
  // Slots begin_migration started moving, and the port of their source.
  std::map<int, std::uint16_t> migrating_from_;
};

// Path of redis-cli (found on PATH, or /usr/bin/redis-cli).
std::string redis_cli_path();

}  // namespace warden::testing
