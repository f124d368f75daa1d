// engines/zookeeper/lock_nodes.h — where a lock lives in ZooKeeper's tree.
//
//   PREFIX                      persistent, created on first use
//   PREFIX/GROUP                container: the server deletes it once empty (the groups
//                               "." and ".." as "%2E" and "%2E%2E", which ZooKeeper
//                               would refuse as path segments)
//   PREFIX/GROUP/NAME'          container: one per lock
//   PREFIX/GROUP/NAME'/x-GUID-0000000012   an exclusive request (EPHEMERAL_SEQUENTIAL)
//   PREFIX/GROUP/NAME'/s-GUID-0000000013   a shared request
//   PREFIX/GROUP/NAME'/p-K.N-GUID-0000000014   a request for K of a semaphore's N permits
//
// NAME' is the lock name with every byte outside [A-Za-z0-9_~-] percent-escaped (and
// '.', so the names "." and ".." cannot occur): ZooKeeper refuses control characters and
// some Unicode ranges in node names, and '/' separates them. GUID is the client's id and a
// request counter, so a client that lost the connection while creating finds its node.
// The sequence suffix, added by the server, orders the requests of the lock.
//
// Layout::curator (zk://…?layout=curator) names nodes as Apache Curator's locks do, so
// Curator's InterProcessMutex and kazoo's Lock share a lock with warden:
//
//   PREFIX/GROUP/NAME/_c_UUID-lock-0000000012     an exclusive request (InterProcessMutex)
//   PREFIX/GROUP/NAME/_c_UUID-__READ__0000000013  a shared request (InterProcessReadWriteLock)
//
// NAME is the lock name as it is (a plain znode name: no escaping, so another library
// finds the lock by its name; names that are not one are refused), PREFIX may be empty.
// Its requests are every child that ends in a known kind and 10 digits — Curator's
// "lock-" and "__WRIT__" and kazoo's "__lock__" (exclusive), Curator's "__READ__" and
// kazoo's "__rlock__" (shared) — ordered by those digits; other children are no requests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "warden/types.h"

namespace warden::engines::zookeeper {

// How request nodes are named (zk://…?layout=): warden's own, or Curator's.
enum class Layout { warden, curator };

struct LockNodes {
  Layout layout = Layout::warden;
  std::string prefix;  // PREFIX ("" for the root, Layout::curator only)
  std::string group;   // PREFIX/GROUP
  std::string lock;    // PREFIX/GROUP/NAME'

  // Throws Error(invalid_argument) for a name Layout::curator cannot use as a node name
  // as it is ('/', "." or "..", a byte outside printable ASCII); checks nothing else.
  static LockNodes of(Layout layout, const std::string& prefix, const std::string& group,
                      const std::string& name);
  // PREFIX/GROUP, as in of(…).group (a group's listing). Throws as of()
  // does for a group Layout::curator cannot use.
  static std::string group_node(Layout layout, const std::string& prefix, const std::string& group);
  // The path to create (EPHEMERAL_SEQUENTIAL) for a request: "LOCK/x-GUID-", or with
  // capacity > 0 a semaphore's "LOCK/p-K.N-GUID-"; Layout::curator: "LOCK/_c_GUID-lock-"
  // or "LOCK/_c_GUID-__READ__" (GUID then being a UUID, as Curator's protection id).
  std::string request(Mode mode, const std::string& guid, std::uint32_t permits = 0,
                      std::uint32_t capacity = 0) const;
  // The nodes above a request, each with its create mode, from the top: PREFIX's levels
  // (persistent), then GROUP and NAME' (containers, which the server deletes once their
  // last child is gone).
  std::vector<std::pair<std::string, int>> parents() const;
};

// A random (version 4) UUID, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx": the GUID of a
// Layout::curator request, as Curator puts one in its nodes' names.
std::string random_uuid();

// One child of a lock node, parsed.
struct RequestNode {
  std::string name;
  Mode mode = Mode::exclusive;  // a semaphore's request: shared
  std::string guid;             // Layout::curator: the UUID after "_c_" (kazoo: its hex)
  std::int64_t sequence = 0;
  std::uint32_t permits = 0;   // a semaphore's request: K
  std::uint32_t capacity = 0;  // ... of N; 0 for a lock's request
};

// nullopt for a child that is no request of `layout`.
std::optional<RequestNode> parse_request(const std::string& name, Layout layout);

// The request that blocks `own` among `children`: for a writer the one just before it,
// for a reader the nearest earlier writer; for a semaphore's request, while the permits
// of every earlier request and its own do not fit, the earliest (the wait then watches
// the lock's children: any earlier request's going may make room). nullopt:
// nothing blocks it. A lock's request and a semaphore's never share a lock: one that
// finds an earlier request of the other kind, or of another N, is refused
// (Error(invalid_argument)); each judges only the requests before it, so both orders of
// a race end the same way.
std::optional<RequestNode> blocker_of(const std::vector<std::string>& children,
                                      const RequestNode& own, const LockNodes& nodes);

// A request node's data: "warden MODE CLIENT_ID" (for people reading the tree), then,
// for an election's candidate, a newline and its value (any bytes; the client id never
// holds a newline).
std::string request_data(Mode mode, std::string_view client_id, std::string_view value);
// The value in a request node's data: what follows the first newline, or "".
std::string value_in(std::string_view data);

}  // namespace warden::engines::zookeeper
