// warden/fence_gate.h — the resource side of fencing.
//
// A storage service that is written to by lock holders keeps a FenceGate and admits
// a write only if its fencing token is at least the highest token it has admitted
// for the same lock. A holder whose lease was lost (paused, partitioned) writes with
// an old token after a newer holder has written, and is rejected. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "warden/sequencer.h"

namespace warden {

class FenceGate {
 public:
  // true iff token >= the highest token admitted so far for `lock` (then it becomes
  // the highest); false for a stale token. `lock` is any stable identity of the
  // lock, e.g. "group/name".
  bool admit(std::string_view lock, std::uint64_t token);
  // The same, keyed by the sequencer's group/name.
  bool admit(const Sequencer& sequencer);
  // The highest token admitted for `lock`, 0 if none.
  std::uint64_t highest(std::string_view lock) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::uint64_t> highest_;  // guarded by mu_
};

}  // namespace warden
