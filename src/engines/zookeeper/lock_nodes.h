// engines/zookeeper/lock_nodes.h — where a lock lives in ZooKeeper's tree.
//
//   PREFIX                      persistent, created on first use
//   PREFIX/GROUP                container: the server deletes it once empty
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
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "warden/types.h"

namespace warden::engines::zookeeper {

struct LockNodes {
  std::string prefix;  // PREFIX
  std::string group;   // PREFIX/GROUP
  std::string lock;    // PREFIX/GROUP/NAME'

  static LockNodes of(const std::string& prefix, const std::string& group,
                      const std::string& name);
  // The path to create (EPHEMERAL_SEQUENTIAL) for a request: "LOCK/x-GUID-", or with
  // capacity > 0 a semaphore's "LOCK/p-K.N-GUID-".
  std::string request(Mode mode, const std::string& guid, std::uint32_t permits = 0,
                      std::uint32_t capacity = 0) const;
};

// One child of a lock node, parsed.
struct RequestNode {
  std::string name;
  Mode mode = Mode::exclusive;  // a semaphore's request: shared
  std::string guid;
  std::int64_t sequence = 0;
  std::uint32_t permits = 0;   // a semaphore's request: K
  std::uint32_t capacity = 0;  // ... of N; 0 for a lock's request
};

// nullopt for a child warden did not create.
std::optional<RequestNode> parse_request(const std::string& name);

// A request node's data: "warden MODE CLIENT_ID" (for people reading the tree), then,
// for an election's candidate, a newline and its value (any bytes; the client id never
// holds a newline).
std::string request_data(Mode mode, std::string_view client_id, std::string_view value);
// The value in a request node's data: what follows the first newline, or "".
std::string value_in(std::string_view data);

}  // namespace warden::engines::zookeeper
