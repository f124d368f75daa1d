#include "engines/etcd/request_txns.h"

#include <utility>
#include <vector>

#include "engines/etcd/permit_queue.h"
#include "engines/etcd/request_value.h"

namespace warden::engines::etcd {
namespace {

using etcdserverpb::RangeRequest;
using etcdserverpb::TxnRequest;
using etcdserverpb::TxnResponse;

// Adds a read of the nearest key in `scope` created before `revision` (0: the first
// key of `scope`).
void add_blocker_read(TxnRequest& request, const std::string& scope, std::int64_t revision) {
  RangeRequest* range = request.add_success()->mutable_request_range();
  range->set_key(scope);
  range->set_range_end(prefix_end(scope));
  range->set_limit(1);
  range->set_keys_only(true);
  range->set_sort_target(RangeRequest::CREATE);
  if (revision > 0) {
    range->set_max_create_revision(revision - 1);
    range->set_sort_order(RangeRequest::DESCEND);
  } else {
    range->set_sort_order(RangeRequest::ASCEND);
  }
}

// Adds a read of every request of the lock, values included, in create_revision order.
void add_queue_read(TxnRequest& request, const LockKeys& keys, bool to_success) {
  RangeRequest* range =
      (to_success ? request.add_success() : request.add_failure())->mutable_request_range();
  range->set_key(keys.lock);
  range->set_range_end(prefix_end(keys.lock));
  range->set_sort_target(RangeRequest::CREATE);
  range->set_sort_order(RangeRequest::ASCEND);
}

std::vector<QueuedRequest> queue_of(const etcdserverpb::RangeResponse& range,
                                    const LockKeys& keys) {
  std::vector<QueuedRequest> queue;
  for (const auto& kv : range.kvs()) {
    const std::string_view rest = std::string_view(kv.key()).substr(keys.lock.size());
    if (auto r = parse_request(rest, kv.value(), kv.create_revision())) queue.push_back(*r);
  }
  return queue;
}

// The Txn's condition "`key` does not exist yet" and, if so, its put of `value` on
// `lease`: a request key is created once, whichever attempt's reply got lost.
void put_if_absent(TxnRequest& txn, const std::string& key, std::string value,
                   std::int64_t lease) {
  auto* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_target(etcdserverpb::Compare::CREATE);
  compare->set_result(etcdserverpb::Compare::EQUAL);
  compare->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(std::move(value));
  put->set_lease(lease);
}

Error vanished(const std::string& key) {
  return Error(Errc::internal, "etcd: the lock key " + key + " vanished inside a Txn");
}

}  // namespace

const etcdserverpb::RangeResponse& range_at(const TxnResponse& response, int index,
                                            const char* what) {
  if (index >= response.responses_size() || !response.responses(index).has_response_range()) {
    throw Error(Errc::internal,
                std::string("etcd answered a ") + what + " Txn without the range it was asked for");
  }
  return response.responses(index).response_range();
}

Error semaphore_mismatch(const LockKeys& keys) {
  return Error(Errc::invalid_argument,
               "etcd: " + keys.lock + " is a semaphore of another number of permits, or not one");
}

void add_key_read(TxnRequest& request, const std::string& key, bool to_success) {
  RangeRequest* range =
      (to_success ? request.add_success() : request.add_failure())->mutable_request_range();
  range->set_key(key);
  range->set_keys_only(true);
}

// A semaphore's request carries its permits in its value and reads the whole queue
// (permit_queue.h). A lock's request carries the candidate's value of an election from
// its first revision on, so no reader sees a leader without it; layout=concurrency writes
// what etcd's Mutex writes: an empty value, and no look for a semaphore (there are none in
// that layout; any key under the lock is a request).
TxnRequest create_txn(const core::AcquireRequest& request, const LockKeys& keys,
                      const std::string& key, std::string_view client, std::int64_t lease) {
  TxnRequest txn;
  if (request.capacity > 0) {
    put_if_absent(txn, key, permits_value(request.permits, request.capacity, client), lease);
    add_queue_read(txn, keys, true);
    add_queue_read(txn, keys, false);
    return txn;
  }
  const bool warden_layout = keys.layout == Layout::warden;
  put_if_absent(txn, key, warden_layout ? request_value(request.mode, client, request.value) : "",
                lease);
  add_blocker_read(txn, keys.blockers(request.mode), 0);
  if (warden_layout) add_blocker_read(txn, keys.lock + "p/", 0);
  add_key_read(txn, key, false);
  return txn;
}

Created created_from(const TxnResponse& response, const core::AcquireRequest& request,
                     const LockKeys& keys, const std::string& key) {
  if (request.capacity > 0) {
    const auto& range = range_at(response, response.succeeded() ? 1 : 0, "create");
    std::int64_t revision = response.succeeded() ? response.header().revision() : 0;
    if (!response.succeeded()) {
      for (const auto& kv : range.kvs()) {
        if (kv.key() == key) revision = kv.create_revision();
      }
      if (revision == 0) throw vanished(key);
    }
    switch (judge_permits(queue_of(range, keys), revision, request.permits, request.capacity)) {
      case Verdict::mismatch:
        throw semaphore_mismatch(keys);
      case Verdict::holds:
        return Created{revision, true};
      case Verdict::waits:
        break;
    }
    return Created{revision, false};
  }
  if (response.succeeded()) {
    const std::int64_t revision = response.header().revision();
    if (keys.layout == Layout::warden && range_at(response, 2, "create").kvs_size() > 0) {
      throw semaphore_mismatch(keys);
    }
    // The read sees the Txn's own put, or not (either way nothing older is first).
    const auto& first = range_at(response, 1, "create");
    const bool free = first.kvs_size() == 0 || first.kvs(0).create_revision() == revision;
    return Created{revision, free};
  }
  // Created by an earlier attempt whose reply was lost: the look finds what blocks it.
  const auto& own = range_at(response, 0, "create");
  if (own.kvs_size() != 1) throw vanished(key);
  return Created{own.kvs(0).create_revision(), false};
}

// A semaphore's look reads the whole queue: any deletion in it may make room.
TxnRequest look_txn(const core::AcquireRequest& request, const LockKeys& keys,
                    const std::string& key, std::int64_t revision) {
  TxnRequest look;
  add_key_read(look, key, true);
  if (request.capacity > 0) {
    add_queue_read(look, keys, true);
  } else {
    add_blocker_read(look, keys.blockers(request.mode), revision);
  }
  return look;
}

Look looked(const TxnResponse& response, const core::AcquireRequest& request,
            const LockKeys& keys, std::int64_t revision) {
  Look look;
  look.revision = response.header().revision();
  const auto& own = range_at(response, 0, "wait");
  if (own.kvs_size() != 1 || own.kvs(0).create_revision() != revision) {
    look.gone = true;
    return look;
  }
  const auto& read = range_at(response, 1, "wait");
  if (request.capacity > 0) {
    const auto verdict =
        judge_permits(queue_of(read, keys), revision, request.permits, request.capacity);
    if (verdict == Verdict::mismatch) throw semaphore_mismatch(keys);
    look.holds = verdict == Verdict::holds;
    if (!look.holds) {
      look.watch = keys.lock;
      look.range_end = prefix_end(keys.lock);
    }
    return look;
  }
  look.holds = read.kvs_size() == 0;
  if (!look.holds) look.watch = read.kvs(0).key();
  return look;
}

TxnRequest recheck_txn(const std::string& key, const std::string& watched) {
  TxnRequest txn;
  add_key_read(txn, key, true);
  add_key_read(txn, watched, true);
  return txn;
}

Recheck rechecked(const TxnResponse& response, std::int64_t revision) {
  Recheck out;
  out.revision = response.header().revision();
  const auto& own = range_at(response, 0, "poll");
  if (own.kvs_size() != 1 || own.kvs(0).create_revision() != revision) {
    out.gone = true;
    return out;
  }
  const auto& watched = range_at(response, 1, "poll");
  out.blocked = watched.kvs_size() == 1 && watched.kvs(0).create_revision() < revision;
  return out;
}

}  // namespace warden::engines::etcd
