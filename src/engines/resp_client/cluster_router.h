// engines/resp_client/cluster_router.h — commands sent where a Redis Cluster keeps their
// keys.
//
// The router learns the slot map from the nodes (CLUSTER SLOTS: the seeds first, then
// every master it has met) and keeps, per master, its own Connector and pipelines
// (pipeline.h), created when first needed. run() sends each command to the master of
// its key's slot, one pipelined round per node, and follows what the cluster answers:
//
//   MOVED      the slot lives elsewhere now: the map is updated (and read again from
//              the cluster, at most every kRefreshSpacing) and the command is sent there;
//   ASK        the slot is being migrated and its key is on the target: the command is
//              sent there once, preceded by ASKING; the map is unchanged;
//   TRYAGAIN   a multi-key command met a half-migrated slot, CLUSTERDOWN: the cluster is
//              failing over: the command is sent again after a pause,
//
// until the op timeout. A command redirected was not run where it was refused, so
// sending it again runs it once. A node that cannot be reached fails the call (the map
// is read again, so the next call finds a promoted replica as soon as the cluster has
// one).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engines/resp_client/cluster_slots.h"
#include "engines/resp_client/connection.h"
#include "engines/resp_client/connector.h"
#include "engines/resp_client/pipeline.h"
#include "engines/resp_client/tls_context.h"
#include "warden/options.h"

namespace warden::engines::resp_client {

// The slot a command's keys live in: the first key's (EVAL / EVALSHA: the first of
// their KEYS; every other command: its first argument). Throws Error(internal) for a
// command without a key (MULTI, WAIT, an EVAL of no keys): those cannot be routed.
std::uint16_t command_slot(const Command& command);

struct ClusterOptions {
  std::vector<Endpoint> seeds;  // at least one
  // Credentials, TLS and the connect timeout of every node; host and port unused.
  ConnectOptions node;
  std::size_t pipelines_per_node = 2;
  std::chrono::milliseconds op_timeout{5'000};
  RetryPolicy retry;
};

class ClusterRouter final : public Runner {
 public:
  // Loads the TLS files (if any): throws what TlsContext::create throws. Connects
  // nothing: refresh() does.
  explicit ClusterRouter(ClusterOptions options);
  ClusterRouter(const ClusterRouter&) = delete;
  ClusterRouter& operator=(const ClusterRouter&) = delete;

  // Reads the slot map now, from the first node that gives one. Throws Error:
  // unavailable naming every node asked and why it gave no map (down, not in cluster
  // mode, refused our password, serving no slot); permission_denied when every node
  // refused our credentials or certificate. Asks no node after `until` (a call's own
  // deadline: with every node frozen, each would cost op_timeout).
  void refresh(Clock::time_point until = Clock::time_point::max());

  RoundResult run(std::vector<Command> commands) override;

  // The master serving `slot` as far as the router knows (refreshing once, until
  // `until`, if it knows none); nullopt if the cluster names none.
  std::optional<Endpoint> master_of(std::uint16_t slot,
                                    Clock::time_point until = Clock::time_point::max());
  // Every master serving slots, as last read.
  std::vector<Endpoint> masters();
  // The pipeline of the node at `endpoint` (for reads that must stay on one node: a
  // MULTI, a SCAN of its keys).
  Pipeline& pipeline(const Endpoint& endpoint);
  // ConnectOptions for a connection of one's own to `endpoint` (a subscriber's).
  ConnectOptions node_options(const Endpoint& endpoint) const;
  const std::shared_ptr<const TlsContext>& tls() const { return tls_; }

  // "cluster h1:p1,h2:p2" (the seeds), for messages.
  const std::string& description() const { return description_; }

  // The shortest time between two reads of the map prompted by MOVED or failures.
  static constexpr std::chrono::milliseconds kRefreshSpacing{100};

 private:
  struct Node {
    std::shared_ptr<Connector> connector;
    std::vector<std::unique_ptr<Pipeline>> pipelines;
    std::size_t next = 0;  // guarded by the router's mu_
  };

  // The map from one node, asked until `until` at the latest; throws Error saying why it
  // gave none.
  SlotMap read_map(const Endpoint& endpoint, Clock::time_point until);
  // refresh(until), unless one ran within kRefreshSpacing; never throws (a failed read
  // leaves the map as it was).
  void refresh_soon(Clock::time_point until);
  Node& node(const Endpoint& endpoint);  // mu_ held
  // One pipelined round of `commands` on the node at `endpoint`.
  RoundResult run_on(const Endpoint& endpoint, std::vector<Command> commands);

  const ClusterOptions options_;
  const std::shared_ptr<const TlsContext> tls_;
  const std::string description_;

  std::mutex mu_;
  SlotMap map_;                                      // guarded by mu_
  std::map<Endpoint, std::unique_ptr<Node>> nodes_;  // guarded by mu_; never erased
  Clock::time_point last_refresh_;                   // guarded by mu_
};

}  // namespace warden::engines::resp_client
