// Small helpers shared by the zk:// engine tests: reading the engine's request nodes
// behind its back (through the fixture's own ZooKeeper sessions), queueing a waiter, and
// URIs with chosen parameters or a chosen order of servers.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <future>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/server_process.h"
#include "support/waiting.h"
#include "support/zookeeper_server.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden::testing {

// The engine's default prefix.
inline constexpr std::string_view kPrefix = "/warden";

// The request nodes (names, sorted) of the lock (group, name): one per waiting or
// holding request.
inline std::vector<std::string> lock_children(ZooKeeperEnsemble& zk, std::string_view group,
                                              std::string_view name,
                                              std::string_view prefix = kPrefix) {
  return zk.children(zk_lock_path(group, name, prefix));
}

inline std::size_t requests(ZooKeeperEnsemble& zk, std::string_view group, std::string_view name) {
  return lock_children(zk, group, name).size();
}

// Every znode under PREFIX/GROUP (the group node itself excluded), full paths.
inline std::vector<std::string> group_tree(ZooKeeperEnsemble& zk, std::string_view group = "g",
                                           std::string_view prefix = kPrefix) {
  return zk.tree(std::string(prefix) + '/' + std::string(group));
}

// Every znode under PREFIX (the prefix node itself excluded): the groups' and locks'
// containers and the request nodes.
inline std::vector<std::string> warden_tree(ZooKeeperEnsemble& zk,
                                            std::string_view prefix = kPrefix) {
  return zk.tree(std::string(prefix));
}

// The nodes left behind, for a failure message.
inline std::string describe(const std::vector<std::string>& nodes) {
  std::string text;
  for (const auto& n : nodes) text += "\n  " + n;
  return text.empty() ? " none" : text;
}

// true once no request node of the lock is left (within `timeout`).
inline bool no_requests(ZooKeeperEnsemble& zk, std::string_view group, std::string_view name,
                        Clock::duration timeout = kPrompt) {
  return eventually([&] { return requests(zk, group, name) == 0; }, timeout);
}

// true once nothing at all is left under PREFIX: the server's container check removes
// the empty lock and group nodes every `container_check_ms`, a lock node first and its
// group at a later round.
inline bool empty_prefix(ZooKeeperEnsemble& zk, Clock::duration timeout = 5s) {
  return eventually([&] { return warden_tree(zk).empty(); }, timeout);
}

// Starts `client`'s acquire of ("g", name) on another thread and returns once ZooKeeper
// holds `requests_total` request nodes for that lock (for at most 5 s: the caller
// asserts requests() itself, so a waiter that never queued fails there, by name).
inline std::future<Lease> acquire_queued(Client& client, ZooKeeperEnsemble& zk,
                                         const std::string& name, Mode mode, Wait wait,
                                         std::stop_token stop = {},
                                         std::size_t requests_total = 2) {
  auto future = std::async(std::launch::async, [&client, name, mode, wait, stop] {
    return client.lock("g", name).acquire(mode, wait, stop);
  });
  eventually([&] {
    if (requests(zk, "g", name) >= requests_total) return true;
    std::this_thread::sleep_for(20ms);  // each look opens a session of its own
    return false;
  });
  return future;
}

// "zk://HOSTS?QUERY" (QUERY may be empty): the whole ensemble, with URI parameters.
inline std::string uri_with(const ZooKeeperEnsemble& zk, const std::string& query) {
  return query.empty() ? zk.uri() : zk.uri() + '?' + query;
}

// "zk://USER:PASSWORD@HOSTS?QUERY".
inline std::string uri_as(const ZooKeeperEnsemble& zk, const std::string& credentials,
                          const std::string& query = "") {
  return "zk://" + credentials + '@' + zk.hosts() + (query.empty() ? "" : '?' + query);
}

// A loopback address nothing listens on.
inline std::string dead_host() { return "127.0.0.1:" + std::to_string(free_port()); }

// ClientOptions with a default TTL of `ttl`, optionally an op_timeout and a renewal
// interval (0: the core's ttl/3).
inline ClientOptions with_ttl(std::chrono::milliseconds ttl,
                              std::chrono::milliseconds op_timeout = ClientOptions{}.op_timeout,
                              std::chrono::milliseconds renew_interval = 0ms) {
  ClientOptions options;
  options.lock_defaults.ttl = ttl;
  options.op_timeout = op_timeout;
  options.renew_interval = renew_interval;
  return options;
}

// The time recorded by stamp_now() (e.g. in an on_lost callback).
inline Clock::time_point at(const std::atomic<Clock::rep>& stamp) {
  return Clock::time_point{Clock::duration(stamp.load())};
}

inline Clock::rep stamp_now() { return Clock::now().time_since_epoch().count(); }

}  // namespace warden::testing
