// The conformance suite against redis://, a real redis-server (one per case kind and test process)
// on a free loopback port with a temp dir of its own and no persistence; once more over
// TLS (rediss://, the server's TLS port, certificates from support/test_certs.h), so
// every clause also holds when the bytes go through OpenSSL; and once more behind
// Sentinel (redis+sentinel://, a master with a replica and a sentinel), so
// every clause also holds when the master is found through the sentinels; and once more
// on a Redis Cluster (redis+cluster://, three masters), so every clause also
// holds when each lock's calls are routed to its slot's master.
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "conformance/election_suite.h"
#include "conformance/multi_lock_suite.h"
#include "conformance/semaphore_suite.h"
#include "support/redis_cluster.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"
#include "support/test_certs.h"

namespace warden::conformance {
namespace {

// redis:// offers every capability but a complete watch; tokens are floored at the server's clock,
// so they do not go back after a restart that lost data (docs/engines/redis.md).
constexpr Capabilities kRedis{.shared = true,
                              .fair = true,
                              .non_fair = true,
                              .lock_delay = true,
                              .fencing = true,
                              .durable_tokens = true,
                              .check = true,
                              .semaphore = true,
                              .election = true,
                              .cache = true};

// A server with a TLS port too, trusting the test CA (no client certificates).
testing::RedisOptions tls_server() {
  const testing::TestCerts& certs = testing::TestCerts::shared();
  testing::RedisOptions options;
  options.tls =
      testing::RedisTlsOptions{certs.server().cert, certs.server().key, certs.ca().cert, false};
  return options;
}

// Every key the engine keeps for the lock shares its hash tag `{warden:GROUP/NAME}`
// (holders, info, queue, waiters, admitted waiters).
std::vector<std::string> lock_keys(std::string_view group, std::string_view name) {
  const std::string tag = testing::lock_tag(group, name);
  return {tag + ":h", tag + ":i", tag + ":q", tag + ":w", tag + ":p"};
}

std::size_t count_of(const std::string& reply) {
  try {
    return static_cast<std::size_t>(std::stoull(reply));
  } catch (const std::exception&) {
    throw std::runtime_error("ZCARD answered " + reply);
  }
}

class RedisBackend final : public Backend {
 public:
  // tls: clients connect to the TLS port (rediss://); probes keep the plain one.
  explicit RedisBackend(bool tls = false)
      : tls_(tls), server_(tls ? tls_server() : testing::RedisOptions{}) {}

  std::string uri() const override { return tls_ ? server_.tls_uri() : server_.uri(); }
  bool reached_only_at_its_uri() const override { return true; }

  // Behind the clients' back, as an operator or an eviction could: delete every key
  // the engine keeps for the lock. They share the lock's hash tag `{warden:GROUP/NAME}`
  // (holders, info, queue, waiters, admitted waiters).
  bool drop_grants(std::string_view group, std::string_view name) override {
    std::vector<std::string> del = lock_keys(group, name);
    del.insert(del.begin(), "DEL");
    testing::RedisProbe probe(server_);
    const std::string deleted = probe.command(del);
    if (deleted.rfind("(error)", 0) == 0) throw std::runtime_error("DEL answered " + deleted);
    return true;
  }

  // The lock's waiters sorted set (":w"): every waiter, fair or not, until it is
  // admitted or gives up. (":q", the list, holds the fair waiters only.)
  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    testing::RedisProbe probe(server_);
    return count_of(probe.command({"ZCARD", testing::lock_tag(group, name) + ":w"}));
  }

  bool freeze() override {
    server_.pause();
    return true;
  }
  void thaw() override { server_.resume(); }

 private:
  const bool tls_;
  testing::RedisServer server_;
};

// The same keys, on the master the sentinel names.
class RedisSentinelBackend final : public Backend {
 public:
  RedisSentinelBackend() : group_({.replicas = 1, .sentinels = 1}) {}

  std::string uri() const override { return group_.uri(); }

  bool drop_grants(std::string_view group, std::string_view name) override {
    std::vector<std::string> del = lock_keys(group, name);
    del.insert(del.begin(), "DEL");
    const std::string deleted = group_.command(group_.master_port(), del);
    if (deleted.rfind("(error)", 0) == 0) throw std::runtime_error("DEL answered " + deleted);
    return true;
  }

  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    return count_of(
        group_.command(group_.master_port(), {"ZCARD", testing::lock_tag(group, name) + ":w"}));
  }

  bool freeze() override {
    group_.pause_all();
    return true;
  }
  void thaw() override { group_.resume_all(); }

 private:
  mutable testing::RedisSentinelGroup group_;
};

// The same keys, on the master of their slot. No replicas: no clause needs a failover,
// and three nodes come up faster than six.
class RedisClusterBackend final : public Backend {
 public:
  RedisClusterBackend() : cluster_({.masters = 3, .replicas_per_master = 0}) {}

  std::string uri() const override { return cluster_.uri(); }

  bool drop_grants(std::string_view group, std::string_view name) override {
    std::vector<std::string> del = lock_keys(group, name);
    del.insert(del.begin(), "DEL");
    const std::string deleted = cluster_.command(master_of(group, name), del);
    if (deleted.rfind("(error)", 0) == 0) throw std::runtime_error("DEL answered " + deleted);
    return true;
  }

  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    return count_of(
        cluster_.command(master_of(group, name), {"ZCARD", testing::lock_tag(group, name) + ":w"}));
  }

  bool freeze() override {
    cluster_.pause_all();
    return true;
  }
  void thaw() override { cluster_.resume_all(); }

 private:
  std::uint16_t master_of(std::string_view group, std::string_view name) {
    const std::string slot =
        cluster_.command(cluster_.node_ports().front(),
                         {"CLUSTER", "KEYSLOT", testing::lock_tag(group, name) + ":i"});
    return cluster_.master_port_for_slot(std::stoi(slot));
  }

  mutable testing::RedisClusterGroup cluster_;
};

const EngineCase kPlain{"Redis", kRedis, [] { return std::make_unique<RedisBackend>(); }};
const EngineCase kCluster{"RedisCluster", kRedis,
                          [] { return std::make_unique<RedisClusterBackend>(); }};

INSTANTIATE_TEST_SUITE_P(
    Redis, Conformance,
    ::testing::Values(
        kPlain, EngineCase{"RedisTls", kRedis, [] { return std::make_unique<RedisBackend>(true); }},
        EngineCase{"RedisSentinel", kRedis,
                   [] { return std::make_unique<RedisSentinelBackend>(); }},
        kCluster,
        // Every lock cached: revokes come from a '?' a refused request
        // publishes on the lock's channel; once on one server, once on a
        // cluster, where the channel lives on the lock's master.
        EngineCase{"RedisCached", kRedis, [] { return std::make_unique<RedisBackend>(); },
                   /*cache=*/true},
        EngineCase{"RedisClusterCached", kRedis,
                   [] { return std::make_unique<RedisClusterBackend>(); },
                   /*cache=*/true}),
    name_printer);
// The same scripts behind every topology: one server, and a cluster (where each
// semaphore's keys live on its slot's master).
INSTANTIATE_TEST_SUITE_P(Redis, SemaphoreConformance, ::testing::Values(kPlain, kCluster),
                         name_printer);

// A campaign's value lives in its lock's :i on one server and on a cluster alike.
INSTANTIATE_TEST_SUITE_P(Redis, ElectionConformance, ::testing::Values(kPlain, kCluster),
                         name_printer);

INSTANTIATE_TEST_SUITE_P(Redis, MultiLockConformance, ::testing::Values(kPlain, kCluster),
                         name_printer);

}  // namespace
}  // namespace warden::conformance
