// engines/etcd/request_slots.h — which request keys of each lock a Client is using, so
// it reuses a small set of key names instead of inventing a new one per request.
//
// Why: etcd's index keeps an entry for every key name ever written (a deleted key's
// entry stays until the next compaction), and the wait loop's range read walks every
// entry under the lock's prefix. One fresh name per request made each acquire slower
// the more acquires came before it (measured: a third fewer cycles/s after a few
// thousand). With slots, a lock's prefix holds at most one name per concurrent request
// of each Client, like etcd's own mutex, which names its key after the session lease.
//
// A slot is taken for a request and given back once its key is known to be gone
// (release or withdrawal confirmed, or its lease lost). A slot whose delete could not
// be confirmed is never given back: the name is not reused while it might exist.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace warden::engines::etcd {

class RequestSlots {
 public:
  // The smallest slot of `lock` not in use; now in use.
  std::uint32_t take(const std::string& lock);
  void give_back(const std::string& lock, std::uint32_t slot);

 private:
  std::mutex mu_;
  // By the hash of the lock's name, not the name: with thousands of requests waiting on as
  // many locks, a copy of each name would be a good part of what a wait costs. Two locks
  // whose names hash alike share one set, which only makes one of them take a higher slot
  // (the names stay distinct within each lock). Each set is ascending, nearly always {0}.
  std::unordered_map<std::size_t, std::vector<std::uint32_t>> used_;  // guarded by mu_
};

}  // namespace warden::engines::etcd
