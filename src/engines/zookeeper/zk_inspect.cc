// zk://'s status: the lock node's children (lock_nodes.h) read by the engine's own rule.
// In sequence order, an exclusive request first holds alone, else the leading run of
// shared requests holds together; the rest wait. Tokens are the holders' czxids (one
// exists per holder, pipelined behind the listing); leases live as long as their
// session, so no time is left to show. A group is the children of its node, each lock
// then listed, all pipelined.
#include <algorithm>
#include <future>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engines/zookeeper/lock_nodes.h"
#include "engines/zookeeper/zk_engine.h"
#include "engines/zookeeper/zk_session.h"

namespace warden::engines::zookeeper {
namespace {

// The requests among `children`, in queue (sequence) order.
std::vector<RequestNode> queue_of(const std::vector<std::string>& children, Layout layout) {
  std::vector<RequestNode> queue;
  for (const auto& child : children) {
    if (auto node = parse_request(child, layout)) queue.push_back(std::move(*node));
  }
  std::sort(queue.begin(), queue.end(),
            [](const RequestNode& a, const RequestNode& b) { return a.sequence < b.sequence; });
  return queue;
}

// How many requests at the head of `queue` hold the lock, or the semaphore (its leading
// requests while their permits fit).
std::size_t holding(const std::vector<RequestNode>& queue) {
  if (queue.empty()) return 0;
  std::size_t n = 0;
  if (const std::uint32_t capacity = queue.front().capacity; capacity > 0) {
    std::uint64_t held = 0;
    while (n < queue.size() && queue[n].capacity == capacity &&
           held + queue[n].permits <= capacity) {
      held += queue[n].permits;
      ++n;
    }
    return n;
  }
  if (queue.front().mode == Mode::exclusive) return 1;
  while (n < queue.size() && queue[n].mode == Mode::shared && queue[n].capacity == 0) ++n;
  return n;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// lock_nodes.cc percent-escapes every byte outside [A-Za-z0-9_~-]; this undoes it.
// nullopt for a node name warden did not make.
std::optional<std::string> unescaped(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hex_digit(text[i + 1]);
    const int low = hex_digit(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// Children of `path` after a sync (so grants made through other servers are seen);
// empty when the node does not exist.
std::vector<std::string> children_of(ZkSession& session, const std::string& path) {
  auto synced = session.sync(path);
  auto listed = session.children(path);
  const int sync_rc = session.await(std::move(synced));
  ChildrenResult result = session.await(std::move(listed));
  if (sync_rc != ZOK && sync_rc != ZNONODE) throw_zk_error(sync_rc, "sync of " + path);
  if (result.rc == ZNONODE) return {};
  if (result.rc != ZOK) throw_zk_error(result.rc, "listing " + path);
  return std::move(result.children);
}

}  // namespace

LockStatus inspect_on(ZkSession& session, const LockNodes& nodes, const core::LockKey& key) {
  const std::vector<RequestNode> queue = queue_of(children_of(session, nodes.lock), nodes.layout);
  const std::size_t held = holding(queue);
  // The holders' data too: an election's leader keeps its value there.
  std::vector<std::future<GetResult>> stats;
  for (std::size_t i = 0; i < held; ++i) {
    stats.push_back(session.get(nodes.lock + '/' + queue[i].name));
  }
  LockStatus s;
  s.group = key.group;
  s.name = key.name;
  for (std::size_t i = 0; i < held; ++i) {
    const GetResult stat = session.await(std::move(stats[i]));
    if (stat.rc == ZNONODE) continue;  // released since the listing
    if (stat.rc != ZOK) throw_zk_error(stat.rc, "stat of " + nodes.lock + '/' + queue[i].name);
    s.holders.push_back(HolderStatus{queue[i].mode, static_cast<std::uint64_t>(stat.czxid),
                                     std::nullopt, queue[i].permits, value_in(stat.data)});
  }
  // A waiter's deadline lives in its client alone.
  for (std::size_t i = held; i < queue.size(); ++i) {
    s.waiters.push_back(WaiterStatus{queue[i].mode, std::nullopt, queue[i].permits});
  }
  if (!queue.empty()) s.permits = queue.front().capacity;
  return s;
}

std::vector<LockSummary> list_on(ZkSession& session, const std::string& prefix, Layout layout,
                                 std::string_view group) {
  const std::string group_node = LockNodes::group_node(layout, prefix, std::string(group));
  std::vector<std::pair<std::string, std::future<ChildrenResult>>> pending;
  for (const std::string& child : children_of(session, group_node)) {
    // Layout::curator names a lock's node by the lock's name as it is.
    if (auto name =
            layout == Layout::curator ? std::optional<std::string>(child) : unescaped(child)) {
      pending.emplace_back(std::move(*name), session.children(group_node + '/' + child));
    }
  }
  std::vector<LockSummary> out;
  for (auto& [name, future] : pending) {
    const ChildrenResult result = session.await(std::move(future));
    if (result.rc == ZNONODE) continue;  // an empty container the server just deleted
    if (result.rc != ZOK) throw_zk_error(result.rc, "listing " + group_node);
    const auto queue = queue_of(result.children, layout);
    if (queue.empty()) continue;  // a container whose last request is gone
    const std::size_t held = holding(queue);
    out.push_back(LockSummary{name, held, queue.size() - held});
  }
  std::sort(out.begin(), out.end(),
            [](const LockSummary& a, const LockSummary& b) { return a.name < b.name; });
  return out;
}

}  // namespace warden::engines::zookeeper
