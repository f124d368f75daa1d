#include "engines/redis/redis_config.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/tls_options.h"
#include "warden/error.h"

namespace warden::engines::redis {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(Errc::invalid_argument,
              "redis:// URI: " + why +
                  " (expected redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
                  "[?pool=N&waiter_ttl_ms=M][&tls=1&ca=FILE&cert=FILE&key=FILE], or "
                  "redis+sentinel://[[USER]:PASSWORD@]S1[:PORT],S2,.../MASTER[/DB]"
                  "[?sentinel_user=U&sentinel_password=P&...], or "
                  "redis+cluster://[[USER]:PASSWORD@]H1[:PORT],H2,...[?...])");
}

// Sentinel's master names: what `sentinel monitor` accepts without quoting.
bool is_master_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// A decimal number in [low, high], or invalid() naming `what`.
std::int64_t parse_number(const std::string& text, std::int64_t low, std::int64_t high,
                          const std::string& what) {
  if (const auto value = core::parse_int_in_range(text, low, high)) return *value;
  invalid(what + "='" + text + "' is not a number in " + std::to_string(low) + ".." +
          std::to_string(high));
}

}  // namespace

RedisConfig parse_config(const core::Uri& uri, const ClientOptions& options) {
  const bool sentinel = uri.scheme == "redis+sentinel";
  const bool cluster = uri.scheme == "redis+cluster";
  if (uri.scheme != "redis" && !sentinel && !cluster) invalid("scheme is '" + uri.scheme + "'");
  if (uri.hosts.empty()) invalid("no host");
  if (!sentinel && !cluster && uri.hosts.size() > 1) {
    invalid(
        "more than one host; redis:// is one Redis server (for several independent "
        "masters use redlock://)");
  }
  if (uri.password && uri.password->empty()) invalid("empty password");
  if (uri.user && !uri.user->empty() && !uri.password) invalid("a user needs a password");

  RedisConfig config;
  std::string db = uri.path;
  if (sentinel) {
    resp_client::SentinelOptions sentinels;
    const auto slash = uri.path.find('/');
    sentinels.master_name = uri.path.substr(0, slash);
    db = slash == std::string::npos ? std::string() : uri.path.substr(slash + 1);
    if (sentinels.master_name.empty()) invalid("no master name (redis+sentinel://S1,S2/MASTER)");
    if (!is_master_name(sentinels.master_name)) {
      invalid("master name '" + sentinels.master_name + "' is not 1..128 of [A-Za-z0-9._-]");
    }
    if (slash != std::string::npos && db.empty()) invalid("empty database after the master name");
    for (const auto& host : uri.hosts) {
      sentinels.sentinels.push_back({host.host, host.port.value_or(kDefaultSentinelPort)});
    }
    config.sentinel = std::move(sentinels);
  }
  if (cluster) {
    if (!uri.path.empty()) {
      invalid("a database ('/" + uri.path +
              "') on redis+cluster://: a cluster has database 0 only");
    }
    for (const auto& host : uri.hosts) {
      config.cluster_seeds.push_back({host.host, host.port.value_or(kDefaultPort)});
    }
  }
  if (!db.empty()) {
    config.connect.db = static_cast<int>(parse_number(db, 0, 1'000'000, "database"));
  }
  for (const auto& [key, value] : uri.query) {
    if (core::is_tls_parameter(key)) continue;  // parse_tls_options below
    if (sentinel && key == "sentinel_user") {
      if (value.empty()) invalid("empty sentinel_user");
      config.sentinel->user = value;
    } else if (sentinel && key == "sentinel_password") {
      if (value.empty()) invalid("empty sentinel_password");
      config.sentinel->password = value;
    } else if (key == "pool") {
      config.pool_size = static_cast<std::size_t>(
          parse_number(value, 1, static_cast<std::int64_t>(kMaxPoolSize), "pool"));
    } else if (cluster && key == "wait_lines") {
      invalid(
          "wait_lines is not offered on redis+cluster:// (a cluster's waiters wait on "
          "their lock's master's subscriber)");
    } else if (key == "wait_lines") {
      config.wait_lines = static_cast<std::size_t>(
          parse_number(value, 0, static_cast<std::int64_t>(kMaxWaitLines), "wait_lines"));
    } else if (cluster && (key == "min_replicas" || key == "replica_timeout_ms")) {
      invalid(key +
              " is not offered on redis+cluster:// (WAIT would have to follow each "
              "node's part of a call)");
    } else if (key == "min_replicas") {
      config.min_replicas = static_cast<int>(parse_number(value, 1, 16, "min_replicas"));
    } else if (key == "replica_timeout_ms") {
      config.replica_timeout =
          std::chrono::milliseconds(parse_number(value, 1, 60'000, "replica_timeout_ms"));
    } else if (key == "layout") {
      if (value != "simple" && value != "queue") {
        invalid("layout='" + value + "' is not 'queue' (warden's own, the default) or 'simple'");
      }
    } else if (key == "lock_key") {
      if (value.empty()) invalid("empty lock_key");
    } else if (key == "waiter_ttl_ms") {
      config.waiter_ttl = std::chrono::milliseconds(
          parse_number(value, kMinWaiterTtl.count(), kMaxWaiterTtl.count(), "waiter_ttl_ms"));
    } else {
      invalid("unknown parameter '" + key + "'");
    }
  }
  const auto layout = uri.query.find("layout");
  if (layout != uri.query.end() && layout->second == "simple") {
    if (sentinel || cluster) {
      throw Error(Errc::unsupported,
                  "redis:// URI: layout=simple is offered on redis:// (one server) only, not on " +
                      uri.scheme + "://");
    }
    for (const char* queue_only :
         {"wait_lines", "waiter_ttl_ms", "min_replicas", "replica_timeout_ms"}) {
      if (uri.query.count(queue_only)) {
        invalid(std::string(queue_only) +
                " is about warden's queue, which layout=simple does not have");
      }
    }
    const auto key = uri.query.find("lock_key");
    config.simple_lock_key = key == uri.query.end() ? std::string("{group}:{name}") : key->second;
  } else if (uri.query.count("lock_key")) {
    invalid("lock_key needs layout=simple");
  }
  config.connect.host = uri.hosts[0].host;
  config.connect.port = uri.hosts[0].port.value_or(kDefaultPort);
  if (uri.user && !uri.user->empty()) config.connect.user = uri.user;
  config.connect.password = uri.password;
  config.connect.timeout = options.op_timeout;
  if (uri.query.count("replica_timeout_ms") && config.min_replicas == 0) {
    invalid("replica_timeout_ms needs min_replicas");
  }
  config.connect.tls = core::parse_tls_options(uri, "redis");
  if (config.sentinel) {
    if (config.sentinel->user && !config.sentinel->password) {
      invalid("sentinel_user needs sentinel_password");
    }
    config.sentinel->timeout = options.op_timeout;
    config.sentinel->tls = config.connect.tls;
  }
  config.op_timeout = options.op_timeout;
  config.retry = options.retry;
  config.poll = options.retry;
  config.poll.max =
      std::max(std::chrono::milliseconds(1), std::min(config.poll.max, config.waiter_ttl / 3));
  config.poll.initial = std::min(config.poll.initial, config.poll.max);
  return config;
}

}  // namespace warden::engines::redis
