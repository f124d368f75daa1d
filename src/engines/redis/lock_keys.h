// engines/redis/lock_keys.h — the Redis key names of one lock (see lua/lock.lua).
//
// All share the hash tag {warden:GROUP/NAME}, so a Redis Cluster would keep them in one
// slot. A name may itself contain '{', '}' or ':': the tag then ends at the name's first
// '}', but every key of the lock still starts with the same text up to there, so they
// still share one slot; and two locks never share a key, because the suffixes are
// fixed and hold no '}'.
#pragma once

#include <string>
#include <vector>

#include "core/engine.h"

namespace warden::engines::redis {

struct LockKeys {
  std::string holders;  // :h
  std::string info;     // :i
  std::string queue;    // :q
  std::string waiters;  // :w
  std::string pending;  // :p
  std::string channel;  // :c, the pub/sub channel of wake-ups

  // :k:ENTRY, the list a release pushes to when it admits the queued `entry`
  // (wait_lines.h). lua/lock.lua's wake_list names it the same way.
  std::string wake_list(const std::string& entry) const;
  // The keys every lock script takes, in their order (lua/lock_base.lua).
  std::vector<std::string> all() const { return {holders, info, queue, waiters, pending}; }

  static LockKeys of(const core::LockKey& key);
  static LockKeys of(const std::string& group, const std::string& name);
};

}  // namespace warden::engines::redis
