// engines/redlock/redlock_inspect.h — redlock://'s answers to `warden status`.
//
// A lock is held when a quorum of masters hold the same value for it, and that value has
// its token (fence.lua ran); its token is the value's, its time left the least PTTL among
// those masters. Redlock has no queue: there are never waiters. A group's locks are the
// union of every answering master's SCAN, each then inspected; locks held nowhere by a
// quorum (a minority's leftover key) are left out. Reads only: nothing is written.
// With the simple naming (redis://…?layout=simple) another client's SET NX lock on the
// key is shown as a holder with token 0.
#pragma once

#include <chrono>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "engines/redlock/lock_keys.h"
#include "engines/redlock/masters.h"

namespace warden::engines::redlock {

// Throws Error(unavailable) when fewer than a quorum of masters answer.
LockStatus inspect_on(Masters& masters, const KeyNaming& naming, const core::LockKey& key,
                      std::chrono::milliseconds timeout);
std::vector<LockSummary> list_on(Masters& masters, const KeyNaming& naming, std::string_view group,
                                 std::chrono::milliseconds timeout);

}  // namespace warden::engines::redlock
