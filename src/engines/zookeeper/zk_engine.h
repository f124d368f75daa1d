// engines/zookeeper/zk_engine.h — zk://: a fair read-write lock in a ZooKeeper ensemble,
// the classic recipe: one EPHEMERAL_SEQUENTIAL node per request under the lock's node,
// ordered by sequence number (docs/engines/zookeeper.md).
//
// A request creates its node and, pipelined behind it in the same round trip, lists the
// lock's children. A writer is blocked by any earlier request, a reader by earlier
// writers only; a blocked request watches only its nearest blocker (no herd) and lists
// the children again after every wake-up before it claims the lock. The token is the
// node's czxid. Leases live as long as the session: its timeout bounds how long a dead
// holder keeps the lock; a suspended connection loses held leases at once unless the
// URI says on_suspend=wait.
//
// FIFO by construction: non-fair (barging) and lock-delay are refused as unsupported.
//
// layout=curator (lock_nodes.h) names the requests as Curator's locks do and counts
// Curator's and kazoo's requests as its own kinds, by the same rules; it has no
// semaphores or elections.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "core/uri.h"
#include "engines/zookeeper/lock_nodes.h"
#include "warden/options.h"

namespace warden::engines::zookeeper {

// Throws Error(invalid_argument) for a bad URI; unavailable / deadline_exceeded /
// permission_denied if no server answers or the credentials are refused.
std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options);

class ZkSession;

// zk_inspect.cc: one lock's status from its node's children (holders by the engine's
// rule with their czxids as tokens, no ttl_left: leases are session-bound), and a
// group's locks from the children of the group's node. Write nothing. Throw like
// ZkSession calls.
LockStatus inspect_on(ZkSession& session, const LockNodes& nodes, const core::LockKey& key);
std::vector<LockSummary> list_on(ZkSession& session, const std::string& prefix, Layout layout,
                                 std::string_view group);

}  // namespace warden::engines::zookeeper
