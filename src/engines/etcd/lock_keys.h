// engines/etcd/lock_keys.h — where a lock lives in etcd's keyspace.
//
//   PREFIX/GROUP/NAME'/w/ID    one key per exclusive request (waiting or holding)
//   PREFIX/GROUP/NAME'/s/ID    one key per shared request
//   PREFIX/GROUP/NAME'/p/ID    one key per request for a semaphore's permits
//                              (permit_queue.h)
//
// NAME' is the lock name with '%' and '/' percent-escaped, so no name is a prefix path
// of another ("a" and "a/w" own disjoint ranges). ID is the client's id and a counter:
// unique per request, and chosen before the create is sent, so a create whose reply
// was lost can be retried and finds its own key. Every key is attached to a lease; the
// key's create_revision orders the queue and is the fencing token.
#pragma once

#include <string>

#include "core/engine.h"
#include "warden/types.h"

namespace warden::engines::etcd {

struct LockKeys {
  std::string lock;     // "PREFIX/GROUP/NAME'/": every request of the lock
  std::string writers;  // "PREFIX/GROUP/NAME'/w/": the exclusive requests

  static LockKeys of(const std::string& prefix, const std::string& group,
                     const std::string& name);

  // The key of one request of this lock.
  std::string request(Mode mode, const std::string& id) const;
  // The key of one request for permits of this semaphore.
  std::string permits_request(const std::string& id) const { return lock + "p/" + id; }
  // The keys a request in `mode` waits for (all earlier ones of these): a writer waits
  // for every earlier request, a reader only for earlier writers.
  const std::string& blockers(Mode mode) const {
    return mode == Mode::exclusive ? lock : writers;
  }
};

// The end of the range of every key that starts with `prefix` (etcd's range_end).
std::string prefix_end(std::string prefix);

}  // namespace warden::engines::etcd
