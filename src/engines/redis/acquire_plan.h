// engines/redis/acquire_plan.h — what one acquire of redis:// sends, beyond the request
// itself: the name its queue entry and wake-ups go by, and its grant's owner secret.
//
// The blocking acquire and the asynchronous waits (async_waits.h) both send the calls
// rendered from it. A waiting request keeps its plan for as long as it waits, so the plan
// keeps only what the request does not already say, and the calls are rendered at each
// send: five key names and eleven arguments kept instead cost a wait about 1 KiB
// (docs/performance.md, *Heap in use per wait*).
#pragma once

#include <string>

#include "core/engine.h"
#include "engines/redis/lock_keys.h"
#include "engines/resp_client/script.h"

namespace warden::engines::redis {

struct AcquirePlan {
  // `owner` is the grant's owner secret, unique per request; `waiter_ttl` how long a
  // queued entry lives unrefreshed (lua/acquire.lua).
  static AcquirePlan of(const core::AcquireRequest& request, std::string owner,
                        std::chrono::milliseconds waiter_ttl);

  // acquire.lua's call for `request`, the plan's request, on its lock's `keys`.
  resp_client::ScriptCall attempt(const core::AcquireRequest& request, const LockKeys& keys) const;
  // withdraw.lua's call: the lock's keys, its channel and the entry.
  resp_client::ScriptCall withdraw(const LockKeys& keys) const;

  // "x:LIVE:OWNER", "s:LIVE:OWNER", or a semaphore's "sPERMITS:LIVE:OWNER": the name the
  // queue and the wake-ups give this request.
  std::string entry;
  std::string owner;
  bool waits = false;  // not a try: the request's deadline is ahead
};

}  // namespace warden::engines::redis
