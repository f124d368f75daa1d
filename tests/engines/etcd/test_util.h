// Small helpers shared by the etcd:// engine tests: reading the engine's request keys
// behind its back (through etcdctl), queueing a waiter, and URIs that list the members
// in a chosen order.
#pragma once

#include <cstdint>
#include <cstdio>
#include <future>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "support/etcd_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden::testing {

// Every key the engine keeps (its default prefix).
inline std::vector<std::string> warden_keys(EtcdCluster& cluster) { return cluster.keys("warden/"); }

// The request keys of the lock (group, name): one per waiting or holding request.
inline std::vector<std::string> lock_keys(EtcdCluster& cluster, std::string_view group,
                                          std::string_view name) {
  return cluster.keys(etcd_lock_prefix(group, name));
}

inline std::size_t requests(EtcdCluster& cluster, std::string_view group, std::string_view name) {
  return lock_keys(cluster, group, name).size();
}

// The keys left behind, for a failure message.
inline std::string describe(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& k : keys) text += "\n  " + k;
  return text.empty() ? " none" : text;
}

// true once no key is left under warden/ (within `timeout`).
inline bool no_warden_keys(EtcdCluster& cluster, Clock::duration timeout = kPrompt) {
  return eventually([&] { return warden_keys(cluster).empty(); }, timeout);
}

// Starts `client`'s acquire of ("g", name) on another thread and returns once etcd
// holds `requests_total` request keys for that lock (for at most 5 s: the caller
// asserts requests() itself, so a waiter that never queued fails there, by name).
inline std::future<Lease> acquire_queued(Client& client, EtcdCluster& cluster,
                                         const std::string& name, Mode mode, Wait wait,
                                         std::stop_token stop = {},
                                         std::size_t requests_total = 2) {
  auto future = std::async(std::launch::async, [&client, name, mode, wait, stop] {
    return client.lock("g", name).acquire(mode, wait, stop);
  });
  eventually([&] { return requests(cluster, "g", name) >= requests_total; });
  return future;
}

// "etcd://EP[i0],EP[i1],...": the members in the order given (no credentials).
inline std::string uri_in_order(const EtcdCluster& cluster, const std::vector<int>& members) {
  std::string uri = "etcd://";
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i > 0) uri += ',';
    uri += cluster.endpoint(members[i]);
  }
  return uri;
}

// Every member, starting with `first`.
inline std::string uri_starting_at(const EtcdCluster& cluster, int first) {
  std::vector<int> order;
  for (int i = 0; i < cluster.size(); ++i) order.push_back((first + i) % cluster.size());
  return uri_in_order(cluster, order);
}

// The etcd lease id (hex, as etcdctl takes it) that the key `key` is attached to;
// empty if the key does not exist or has no lease.
inline std::string lease_of(EtcdCluster& cluster, const std::string& key) {
  const std::string out = cluster.etcdctl({"get", "-w", "json", "--", key});
  constexpr std::string_view kLease = "\"lease\":";
  const auto at = out.find(kLease);
  if (at == std::string::npos) return {};
  std::uint64_t id = 0;
  for (std::size_t i = at + kLease.size(); i < out.size() && out[i] >= '0' && out[i] <= '9'; ++i) {
    id = id * 10 + static_cast<std::uint64_t>(out[i] - '0');
  }
  if (id == 0) return {};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(id));
  return hex;
}

// The lease of the one request key of the lock ("g", name); empty if there is not
// exactly one.
inline std::string lease_of_lock(EtcdCluster& cluster, std::string_view name) {
  const auto keys = lock_keys(cluster, "g", name);
  return keys.size() == 1 ? lease_of(cluster, keys.front()) : std::string{};
}

// ClientOptions with a default TTL of `ttl` (and, optionally, op_timeout).
inline ClientOptions with_ttl(std::chrono::milliseconds ttl,
                              std::chrono::milliseconds op_timeout = ClientOptions{}.op_timeout) {
  ClientOptions options;
  options.lock_defaults.ttl = ttl;
  options.op_timeout = op_timeout;
  return options;
}

}  // namespace warden::testing
