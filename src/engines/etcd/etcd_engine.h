// engines/etcd/etcd_engine.h — etcd://: a fair read-write lock kept in an etcd cluster
// as one key per request, queued by create_revision (docs/engines/etcd.md).
//
// A request creates its key (lock_keys.h) on its session's lease in one Txn guarded by
// create_revision == 0, and reads in the same Txn whether anything blocks it. A writer
// is blocked by any earlier key of the lock, a reader only by earlier writers. A
// blocked request watches only its nearest blocker's key for deletion (no herd), and
// after every wake-up re-reads its own key and its nearest blocker in one Txn before
// it claims the lock: a key lost with its session is never taken for a grant. The
// token is the key's create_revision, so tokens of one lock strictly increase across
// the whole cluster's history. Release is a delete guarded by that create_revision;
// a cancelled or timed-out wait deletes its key, retried while the session lives.
//
// An election's campaign is an exclusive request whose key's value also carries the
// candidate's value (request_value.h); proclaim puts a new value on the held key, in a
// Txn guarded like release's delete, on the same lease.
//
// FIFO by construction: non-fair (barging) and lock-delay are refused as unsupported.
//
// ?layout=concurrency keeps the same queue in the keys of etcd's own concurrency.Mutex
// (lock_keys.h): one key per request named after its lease (the Client's session, or a
// lease of its own for a second request of the Client on one lock), value empty,
// exclusive only, so warden and `etcdctl lock` exclude each other.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "core/uri.h"
#include "warden/options.h"

namespace warden::engines::etcd {

// Throws Error(invalid_argument) for a bad URI; unavailable / deadline_exceeded /
// permission_denied if no member can be reached or the credentials are refused.
std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options);

class EtcdRpc;

struct LockKeys;
enum class Layout;

// etcd_inspect.cc: one lock's status from one range over its keys (holders and waiters
// by the engine's own rule, tokens = create_revision, no ttl_left), and a group's locks
// from a keys-only range over the group, paged. Write nothing. Throw like EtcdRpc.
LockStatus inspect_on(EtcdRpc& rpc, const LockKeys& keys, const core::LockKey& key);
std::vector<LockSummary> list_on(EtcdRpc& rpc, const std::string& prefix, Layout layout,
                                 std::string_view group);

}  // namespace warden::engines::etcd
