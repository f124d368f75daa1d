// engines/etcd/lock_keys.h — where a lock lives in etcd's keyspace, in either layout
// (etcd:// ?layout=, docs/engines/etcd.md).
//
// layout=warden (the default):
//
//   PREFIX/GROUP/NAME'/w/ID    one key per exclusive request (waiting or holding)
//   PREFIX/GROUP/NAME'/s/ID    one key per shared request
//   PREFIX/GROUP/NAME'/p/ID    one key per request for a semaphore's permits
//                              (permit_queue.h)
//
// NAME' is the lock name with '%' and '/' percent-escaped, so no name is a prefix path
// of another ("a" and "a/w" own disjoint ranges). ID is the client's id and a counter:
// unique per request, and chosen before the create is sent, so a create whose reply
// was lost can be retried and finds its own key.
//
// layout=concurrency (etcd's own concurrency.Mutex, v3lock and `etcdctl lock`):
//
//   [PREFIX/]GROUP/NAME/LEASE  one key per exclusive request, LEASE the request's own
//                              lease id in lowercase hex, value empty
//
// The lock is etcd's lock named "[PREFIX/]GROUP/NAME": every key under "…/NAME/" is a
// request of it, whoever wrote it. NAME is not escaped, so that `etcdctl lock` is given
// the very name; a name holding '/' is refused (its range would lie inside another
// lock's). Two requests on one lease would name the same key: a request is on the
// Client's session lease unless another request of the Client has that key, and then
// on a lease of its own (sessions.h).
//
// In both, every key is attached to a lease; the key's create_revision orders the queue
// and is the fencing token.
#pragma once

#include <cstdint>
#include <string>

#include "core/engine.h"
#include "warden/types.h"

namespace warden::engines::etcd {

enum class Layout { warden, concurrency };

struct LockKeys {
  Layout layout = Layout::warden;
  std::string lock;  // "PREFIX/GROUP/NAME'/": every request of the lock

  // Throws Error(invalid_argument) for a name the layout cannot hold (concurrency: '/').
  static LockKeys of(const std::string& prefix, const std::string& group, const std::string& name,
                     Layout layout = Layout::warden);

  // The key of one request of this lock (layout=warden).
  std::string request(Mode mode, const std::string& id) const;
  // The key of the one request on `lease` (layout=concurrency): "…/NAME/" + hex(lease).
  std::string lease_request(std::int64_t lease) const;
  // The key of one request for permits of this semaphore.
  std::string permits_request(const std::string& id) const { return lock + "p/" + id; }
  // The keys a request in `mode` waits for (all earlier ones of these): a writer waits
  // for every earlier request, a reader only for earlier writers.
  // The exclusive requests are "PREFIX/GROUP/NAME'/w/" (concurrency: every request), made
  // when asked for: a waiting request keeps only `lock`.
  std::string blockers(Mode mode) const {
    return mode == Mode::exclusive || layout == Layout::concurrency ? lock : lock + "w/";
  }
};

// The range of a group's locks: "PREFIX/GROUP/" ("GROUP/" with no prefix).
std::string group_scope(const std::string& prefix, const std::string& group);

// A lease id as etcd's Mutex writes it in its key: lowercase hex, no leading zeros.
std::string lease_hex(std::int64_t lease);

// The end of the range of every key that starts with `prefix` (etcd's range_end).
std::string prefix_end(std::string prefix);

}  // namespace warden::engines::etcd
