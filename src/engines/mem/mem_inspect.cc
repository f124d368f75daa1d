// mem://'s status: the lock table's own queries, turned into the public status types.
#include <algorithm>
#include <string>

#include "engines/mem/mem_engine.h"

namespace warden::engines::mem {
namespace {

using std::chrono::milliseconds;

milliseconds left(table::Time now, table::Time until) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(until - now));
}

}  // namespace

LockStatus status_of(const table::LockTable& table, const core::LockKey& key, table::Time now) {
  const table::KeyInfo info = table.inspect(key.joined());
  LockStatus status;
  status.group = key.group;
  status.name = key.name;
  for (const auto& h : info.holders) {
    status.holders.push_back(
        HolderStatus{h.mode, h.token, left(now, h.expires), h.permits, h.value});
  }
  for (const auto& w : info.waiters) {
    WaiterStatus waiter{w.mode, std::nullopt, w.permits};
    if (w.deadline != table::Time::max()) waiter.deadline_left = left(now, w.deadline);
    status.waiters.push_back(waiter);
  }
  if (info.delayed_until) status.lock_delay_left = left(now, *info.delayed_until);
  status.permits = info.capacity;
  return status;
}

std::vector<LockSummary> summaries_of(const table::LockTable& table, std::string_view group) {
  const std::string prefix = std::string(group) + '/';
  std::vector<LockSummary> out;
  std::string after = prefix;
  // Pages of the table's listing, as wardend's LIST does, until a short page.
  constexpr std::size_t kPage = 1000;
  while (true) {
    const auto page = table.list(prefix, after, kPage);
    for (const auto& k : page) {
      out.push_back(LockSummary{k.key.substr(prefix.size()), k.holders, k.waiters});
    }
    if (page.size() < kPage) return out;
    after = page.back().key;
  }
}

}  // namespace warden::engines::mem
