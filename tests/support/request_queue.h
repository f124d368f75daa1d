// support/request_queue.h — how many of a lock's requests wait, for backends that keep
// one record per request in queue order (etcd keys by create_revision, ZooKeeper
// sequential nodes) and leave "granted" implicit in that order.
#pragma once

#include <cstddef>
#include <vector>

#include "warden/types.h"

namespace warden::testing {

// The requests of one lock in queue order; returns how many do not hold it. The head
// holds; an exclusive request holds only at the head; a shared one holds when no
// exclusive request is ahead of it (readers wait only for earlier writers).
inline std::size_t waiting_requests(const std::vector<Mode>& in_queue_order) {
  std::size_t holders = 0;
  for (const Mode mode : in_queue_order) {
    if (mode == Mode::exclusive) {
      if (holders == 0) holders = 1;
      break;
    }
    ++holders;
  }
  return in_queue_order.size() - holders;
}

}  // namespace warden::testing
