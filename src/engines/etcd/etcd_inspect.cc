// etcd://'s status: a range over a lock's keys (lock_keys.h, permit_queue.h) read by the
// engine's own rule. The request with the lowest create_revision holds if it is
// exclusive; else the leading run of shared requests (before the first exclusive one)
// holds together; a semaphore's leading requests hold while their permits fit; the rest
// wait, in create_revision order. A group is a range over its prefix, page by page at one
// revision, so the pages are one snapshot. Values are read too: a permits request's says
// how many, a lock request's may carry an election candidate's value (request_value.h).
// With layout=concurrency every key under a lock is an exclusive request, whoever wrote
// it (etcd's Mutex reads it so), and the lock's name is the key up to its last '/'.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engines/etcd/etcd_engine.h"
#include "engines/etcd/etcd_rpc.h"
#include "engines/etcd/lock_keys.h"
#include "engines/etcd/permit_queue.h"

namespace warden::engines::etcd {
namespace {

using etcdserverpb::RangeRequest;

// Keys per page of a group's listing.
constexpr std::int64_t kPage = 1000;

bool by_revision(const QueuedRequest& a, const QueuedRequest& b) { return a.revision < b.revision; }

// lock_keys.cc escapes '%' and '/' in names; this undoes it ("%25" -> '%', "%2F" -> '/').
std::string unescaped(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && text.substr(i, 3) == "%25") {
      out += '%';
      i += 2;
    } else if (text[i] == '%' && text.substr(i, 3) == "%2F") {
      out += '/';
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

// One request of a lock, from its key's text after the lock's prefix and its value.
std::optional<QueuedRequest> request_of(Layout layout, std::string_view rest,
                                        std::string_view value, std::int64_t revision) {
  if (layout == Layout::concurrency) {
    QueuedRequest r;
    r.revision = revision;
    return r;
  }
  return parse_request(rest, value, revision);
}

LockStatus inspect_on(EtcdRpc& rpc, const LockKeys& keys, const core::LockKey& key) {
  RangeRequest request;
  request.set_key(keys.lock);
  request.set_range_end(prefix_end(keys.lock));
  request.set_sort_target(RangeRequest::CREATE);
  request.set_sort_order(RangeRequest::ASCEND);
  const auto response = rpc.range(request);

  std::vector<QueuedRequest> queue;
  for (const auto& kv : response.kvs()) {
    if (auto r = request_of(keys.layout, std::string_view(kv.key()).substr(keys.lock.size()),
                            kv.value(), kv.create_revision())) {
      queue.push_back(*r);
    }
  }
  std::sort(queue.begin(), queue.end(), by_revision);
  LockStatus s;
  s.group = key.group;
  s.name = key.name;
  const std::size_t held = holding(queue);
  // Keys live on their client's session lease, kept alive while it runs: the time left
  // is the lease's, which a range does not carry (ttl_left unknown). A waiter's deadline
  // lives in its client alone.
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const QueuedRequest& r = queue[i];
    const Mode mode = r.kind == QueuedRequest::Kind::exclusive ? Mode::exclusive : Mode::shared;
    if (i < held) {
      s.holders.push_back(HolderStatus{mode, static_cast<std::uint64_t>(r.revision), std::nullopt,
                                       r.permits, r.value});
    } else {
      s.waiters.push_back(WaiterStatus{mode, std::nullopt, r.permits});
    }
  }
  if (!queue.empty() && queue.front().kind == QueuedRequest::Kind::permits) {
    s.permits = queue.front().capacity;
  }
  return s;
}

std::vector<LockSummary> list_on(EtcdRpc& rpc, const std::string& prefix, Layout layout,
                                 std::string_view group) {
  const std::string scope = group_scope(prefix, std::string(group));
  const std::string end = prefix_end(scope);
  // Per escaped name, its requests (a name's keys are contiguous, but pages are not).
  std::map<std::string, std::vector<QueuedRequest>> locks;
  std::string from = scope;
  std::int64_t revision = 0;  // the first page's: every page reads the same snapshot
  while (true) {
    RangeRequest request;
    request.set_key(from);
    request.set_range_end(end);
    request.set_limit(kPage);
    request.set_revision(revision);
    const auto response = rpc.range(request);
    if (revision == 0) revision = response.header().revision();
    for (const auto& kv : response.kvs()) {
      const std::string_view rest = std::string_view(kv.key()).substr(scope.size());
      // warden's names are escaped (no '/'); etcd's lock names may hold '/' (the
      // request is then the last segment).
      const auto slash = layout == Layout::concurrency ? rest.rfind('/') : rest.find('/');
      if (slash == std::string_view::npos) continue;
      if (auto r = request_of(layout, rest.substr(slash + 1), kv.value(), kv.create_revision())) {
        locks[std::string(rest.substr(0, slash))].push_back(*r);
      }
    }
    if (!response.more() || response.kvs_size() == 0) break;
    from = response.kvs(response.kvs_size() - 1).key() + '\0';
  }
  std::vector<LockSummary> out;
  for (auto& [escaped, queue] : locks) {
    std::sort(queue.begin(), queue.end(), by_revision);
    const std::size_t held = holding(queue);
    out.push_back(LockSummary{layout == Layout::concurrency ? escaped : unescaped(escaped), held,
                              queue.size() - held});
  }
  // Escaping changes the order ("%2F" sorts before 'a', '/' does not): sort the names.
  std::sort(out.begin(), out.end(),
            [](const LockSummary& a, const LockSummary& b) { return a.name < b.name; });
  return out;
}

}  // namespace warden::engines::etcd
