// cli/status_format.h — how `warden status` prints a lock and a group: a table for
// people, or one JSON object (the same shape for every engine).
#pragma once

#include <string>
#include <vector>

#include "warden/status.h"

namespace warden::cli {

// One lock: holders (mode, token, TTL left) and waiters in queue order.
std::string lock_text(const LockStatus& status);
//   {"url", "lock": "G/N", "holders": [{"mode", "token", "ttl_left_ms"}],
//    "waiters": [{"mode", "deadline_left_ms"}], "lock_delay_left_ms"}
// A token or a time the backend does not know (or a wait without deadline) is null;
// the text says "unknown" for such a token.
std::string lock_json(const std::string& url, const LockStatus& status);

// A group: its locks' names with holder and waiter counts.
std::string group_text(const std::string& group, const std::vector<LockSummary>& locks);
//   {"url", "group", "locks": [{"name", "holders", "waiters"}]}
std::string group_json(const std::string& url, const std::string& group,
                       const std::vector<LockSummary>& locks);

}  // namespace warden::cli
