// engines/etcd/request_txns.h — the two Txns of an etcd:// request, what is sent and what
// the answer means, shared by the blocking acquire (etcd_engine.cc) and the asynchronous
// waits (async_waits.h), so both queue and decide by one rule.
//
// The create: puts the request's key on its session's lease if absent (a create whose
// reply was lost is retried and finds its own key) and, in the same Txn, reads what could
// block it: for a lock, the first key of its blockers and the first semaphore key (a lock
// and a semaphore never share a name); for a semaphore, the whole queue (permit_queue.h).
//
// The look: one linearizable read of the request's own key and of what blocks it now (the
// nearest earlier blocker, or a semaphore's whole queue), after every wake-up (etcd
// #11456: a wake-up alone proves nothing). It says: the key is gone (with its session),
// or it holds, or what deletion to watch for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/engine.h"
#include "engines/etcd/lock_keys.h"
#include "etcdserverpb/rpc.pb.h"
#include "warden/error.h"

namespace warden::engines::etcd {

// How many new sessions one request tries after its session turned out to be gone; a
// few in a row means something else is wrong.
inline constexpr int kSessionRetries = 3;

// The range answer at `index` of a Txn; throws Error(internal) when it is missing.
const etcdserverpb::RangeResponse& range_at(const etcdserverpb::TxnResponse& response, int index,
                                            const char* what);

// Error(invalid_argument): the lock is a semaphore of another number of permits, or not one.
Error semaphore_mismatch(const LockKeys& keys);

// The create Txn of `request`'s key `key` on `lease`; `client` is the Client's id (in the
// key's value).
etcdserverpb::TxnRequest create_txn(const core::AcquireRequest& request, const LockKeys& keys,
                                    const std::string& key, std::string_view client,
                                    std::int64_t lease);

struct Created {
  std::int64_t revision = 0;  // the key's create_revision: the token if granted
  bool free = false;          // nothing earlier blocks it: granted at once
};
// What the create's answer says. Throws semaphore_mismatch, or Error(internal) for an
// answer without what was asked.
Created created_from(const etcdserverpb::TxnResponse& response,
                     const core::AcquireRequest& request, const LockKeys& keys,
                     const std::string& key);

// The look of the request `key`, created at `revision`.
etcdserverpb::TxnRequest look_txn(const core::AcquireRequest& request, const LockKeys& keys,
                                  const std::string& key, std::int64_t revision);

struct Look {
  bool gone = false;  // the request's key is not there (it went with its session)
  bool holds = false;
  // Otherwise: the deletion to watch for, of `watch` (or of any key in [watch, range_end)
  // when range_end is set), from the revision after the look's.
  std::string watch;
  std::string range_end;
  std::int64_t revision = 0;  // the store's revision at the look
};
// What the look's answer says. Throws like created_from.
Look looked(const etcdserverpb::TxnResponse& response, const core::AcquireRequest& request,
            const LockKeys& keys, std::int64_t revision);

// A waiting lock request's poll: its own key and the key it watches, both read once (not
// the queue, which etcd reads whole to sort). While that key is there, created before the
// request, it still blocks the request, and the watch goes on from the poll's revision;
// otherwise a look says what is next.
etcdserverpb::TxnRequest recheck_txn(const std::string& key, const std::string& watched);

struct Recheck {
  bool gone = false;     // the request's key is not there
  bool blocked = false;  // the watched key is still there, created before the request
  std::int64_t revision = 0;
};
Recheck rechecked(const etcdserverpb::TxnResponse& response, std::int64_t revision);

// Whether a look that failed with `code` is worth making again while its wait has time
// left: no answer within op_timeout on any member (frozen, cut off, starved of CPU), not a
// refusal.
inline bool worth_looking_again(Errc code) {
  return code == Errc::deadline_exceeded || code == Errc::unavailable;
}

// Adds a read of `key` alone (keys only) to the Txn's success or failure branch.
void add_key_read(etcdserverpb::TxnRequest& request, const std::string& key, bool to_success);

}  // namespace warden::engines::etcd
