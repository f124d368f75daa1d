// warden/fence_gate.h — the resource side of fencing.
//
// A storage service that is written to by lock holders keeps a FenceGate and admits
// a write only if its fencing token is at least the highest token it has admitted
// for the same lock. A holder whose lease was lost (paused, partitioned) writes with
// an old token after a newer holder has written, and is rejected. Thread-safe.
//
// A lock served from the client's cache (LockOptions::cache) keeps its token across
// unlock() and the next acquire; its holds differ in their reuse number
// (Sequencer::reuse). The gate orders writes by (token, reuse), so one delayed from an
// earlier hold of a cached grant is rejected once a later hold's write was admitted.
// Pass the whole sequencer (or the reuse) for locks that may be cached.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "warden/sequencer.h"

namespace warden {

class FenceGate {
 public:
  // true iff (token, reuse) >= the highest admitted so far for `lock` (then it becomes
  // the highest); false for a stale one. `lock` is any stable identity of the lock,
  // e.g. "group/name".
  bool admit(std::string_view lock, std::uint64_t token, std::uint64_t reuse = 0);
  // The same, keyed by the sequencer's group/name, with its token and reuse.
  bool admit(const Sequencer& sequencer);
  // The highest token admitted for `lock`, 0 if none.
  std::uint64_t highest(std::string_view lock) const;

 private:
  mutable std::mutex mu_;
  // (token, reuse) by lock. guarded by mu_
  std::unordered_map<std::string, std::pair<std::uint64_t, std::uint64_t>> highest_;
};

}  // namespace warden
