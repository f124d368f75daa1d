// etcd://'s status: a range over a lock's keys (lock_keys.h) read by the engine's own
// rule. The request with the lowest create_revision holds if it is exclusive; else the
// leading run of shared requests (before the first exclusive one) holds together; the
// rest wait, in create_revision order. A group is a keys-only range over its prefix,
// page by page at one revision, so the pages are one snapshot.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engines/etcd/etcd_engine.h"
#include "engines/etcd/etcd_rpc.h"
#include "engines/etcd/lock_keys.h"

namespace warden::engines::etcd {
namespace {

using etcdserverpb::RangeRequest;

// Keys per page of a group's listing.
constexpr std::int64_t kPage = 1000;

struct Request {
  std::int64_t revision = 0;  // create_revision: queue order, and the token
  Mode mode = Mode::exclusive;
};

// The mode of a request key whose text after the lock's own prefix is `rest` ("w/ID",
// "s/ID"); false for a key that is not a request.
bool mode_of(std::string_view rest, Mode& mode) {
  if (rest.starts_with("w/")) {
    mode = Mode::exclusive;
  } else if (rest.starts_with("s/")) {
    mode = Mode::shared;
  } else {
    return false;
  }
  return true;
}

// How many requests at the head of `queue` (in create_revision order) hold the lock.
std::size_t holding(const std::vector<Request>& queue) {
  if (queue.empty()) return 0;
  if (queue.front().mode == Mode::exclusive) return 1;
  std::size_t n = 0;
  while (n < queue.size() && queue[n].mode == Mode::shared) ++n;
  return n;
}

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

LockStatus inspect_on(EtcdRpc& rpc, const std::string& prefix, const core::LockKey& key) {
  const LockKeys keys = LockKeys::of(prefix, key.group, key.name);
  RangeRequest request;
  request.set_key(keys.lock);
  request.set_range_end(prefix_end(keys.lock));
  request.set_keys_only(true);
  request.set_sort_target(RangeRequest::CREATE);
  request.set_sort_order(RangeRequest::ASCEND);
  const auto response = rpc.range(request);

  std::vector<Request> queue;
  for (const auto& kv : response.kvs()) {
    Mode mode;
    if (mode_of(std::string_view(kv.key()).substr(keys.lock.size()), mode)) {
      queue.push_back(Request{kv.create_revision(), mode});
    }
  }
  std::sort(queue.begin(), queue.end(),
            [](const Request& a, const Request& b) { return a.revision < b.revision; });
  LockStatus s;
  s.group = key.group;
  s.name = key.name;
  const std::size_t held = holding(queue);
  // Keys live on their client's session lease, kept alive while it runs: the time left
  // is the lease's, which a range does not carry (ttl_left unknown). A waiter's deadline
  // lives in its client alone.
  for (std::size_t i = 0; i < queue.size(); ++i) {
    if (i < held) {
      s.holders.push_back(
          HolderStatus{queue[i].mode, static_cast<std::uint64_t>(queue[i].revision), std::nullopt});
    } else {
      s.waiters.push_back(WaiterStatus{queue[i].mode, std::nullopt});
    }
  }
  return s;
}

std::vector<LockSummary> list_on(EtcdRpc& rpc, const std::string& prefix, std::string_view group) {
  const std::string scope = prefix + '/' + std::string(group) + '/';
  const std::string end = prefix_end(scope);
  // Per escaped name, its requests (a name's keys are contiguous, but pages are not).
  std::map<std::string, std::vector<Request>> locks;
  std::string from = scope;
  std::int64_t revision = 0;  // the first page's: every page reads the same snapshot
  while (true) {
    RangeRequest request;
    request.set_key(from);
    request.set_range_end(end);
    request.set_keys_only(true);
    request.set_limit(kPage);
    request.set_revision(revision);
    const auto response = rpc.range(request);
    if (revision == 0) revision = response.header().revision();
    for (const auto& kv : response.kvs()) {
      const std::string_view rest = std::string_view(kv.key()).substr(scope.size());
      const auto slash = rest.find('/');
      Mode mode;
      if (slash == std::string_view::npos || !mode_of(rest.substr(slash + 1), mode)) continue;
      locks[std::string(rest.substr(0, slash))].push_back(Request{kv.create_revision(), mode});
    }
    if (!response.more() || response.kvs_size() == 0) break;
    from = response.kvs(response.kvs_size() - 1).key() + '\0';
  }
  std::vector<LockSummary> out;
  for (auto& [escaped, queue] : locks) {
    std::sort(queue.begin(), queue.end(),
              [](const Request& a, const Request& b) { return a.revision < b.revision; });
    const std::size_t held = holding(queue);
    out.push_back(LockSummary{unescaped(escaped), held, queue.size() - held});
  }
  // Escaping changes the order ("%2F" sorts before 'a', '/' does not): sort the names.
  std::sort(out.begin(), out.end(),
            [](const LockSummary& a, const LockSummary& b) { return a.name < b.name; });
  return out;
}

}  // namespace warden::engines::etcd
