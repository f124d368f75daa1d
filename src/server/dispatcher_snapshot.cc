// server/dispatcher_snapshot.cc — the dispatcher's part in a planned restart: the table
// and its owner secrets out at a clean shutdown, back in at the next start.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "server/dispatcher.h"

namespace warden::server {

void Dispatcher::drop_waiters(Time now) {
  // Request ids grow with arrival and every waiter queues at the back of its key, so
  // descending ids walk each queue from its back: a waiter is removed only once nothing
  // queues behind it, and removing the last waiter never makes the one before it
  // grantable.
  std::vector<table::RequestId> ids;
  ids.reserve(parked_.size());
  for (const auto& [id, parked] : parked_) ids.push_back(id);
  std::sort(ids.begin(), ids.end(), std::greater<>());
  for (const table::RequestId id : ids) {
    const auto it = parked_.find(id);
    if (it == parked_.end()) continue;  // granted or timed out while time was applied
    if (auto c = connections_.find(it->second.conn); c != connections_.end()) {
      c->second.parked.reset();
      c->second.tagged.erase(it->second.tag);
    }
    parked_.erase(it);
    survive(now, [&] { table_.cancel(id, now); });
  }
  survive(now, [&] { collect(now); });
}

TableSnapshot Dispatcher::snapshot(Time now) {
  survive(now, [&] {
    table_.advance(now);
    collect(now);
  });
  TableSnapshot out;
  const auto keys = table_.list("", "", std::numeric_limits<std::size_t>::max());
  for (const auto& summary : keys) add_key(out, summary.key, now);
  return out;
}

TableSnapshot Dispatcher::snapshot_keys(std::span<const std::string> keys, Time now) const {
  TableSnapshot out;
  for (const std::string& key : keys) add_key(out, key, now);
  return out;
}

void Dispatcher::add_key(TableSnapshot& out, const std::string& key, Time now) const {
  const table::KeyInfo info = table_.inspect(key);
  for (const table::HolderInfo& h : info.holders) {
    table::Grant grant;
    grant.id = h.id;
    grant.key = key;
    grant.token = h.token;
    out.holders.push_back(SnapshotHolder{
        key, h.mode, h.token, secret_of(grant), static_cast<std::uint64_t>(h.ttl.count()),
        static_cast<std::uint64_t>(h.lock_delay.count()), info.capacity, h.permits, h.value});
  }
  if (info.delayed_until && *info.delayed_until > now) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*info.delayed_until - now);
    out.delays.push_back(SnapshotDelay{key, static_cast<std::uint64_t>(left.count())});
  }
}

std::size_t Dispatcher::restore(const TableSnapshot& snapshot, Time now) {
  std::size_t restored = 0;
  for (const SnapshotHolder& h : snapshot.holders) {
    table::Request request;
    request.key = h.key;
    request.mode = h.mode;
    request.ttl = std::chrono::milliseconds(static_cast<std::int64_t>(h.ttl_ms));
    request.lock_delay = std::chrono::milliseconds(static_cast<std::int64_t>(h.lock_delay_ms));
    request.session = 0;  // no connection: like a grant whose connection dropped
    request.capacity = h.capacity;
    request.permits = h.permits;
    request.value = h.value;
    if (const auto grant = table_.restore(request, h.token, now)) {
      restored_secrets_[grant->id] = h.secret;
      ++restored;
    }
  }
  for (const SnapshotDelay& d : snapshot.delays) {
    table_.restore_delay(
        d.key, now + std::chrono::milliseconds(static_cast<std::int64_t>(d.left_ms)), now);
  }
  return restored;
}

}  // namespace warden::server
