#include "engines/redlock/redlock_config.h"

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "core/tls_options.h"
#include "engines/redis/redis_config.h"
#include "warden/error.h"

namespace warden::engines::redlock {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(Errc::invalid_argument,
              "redlock:// URI: " + why +
                  " (expected redlock://[[USER]:PASSWORD@]HOST[:PORT],HOST[:PORT],...[/DB]"
                  "[?node_timeout_ms=T&retry_count=C&retry_delay_ms=D&retry_jitter_ms=J"
                  "&pool=P&tls=1&ca=FILE&cert=FILE&key=FILE])");
}

std::int64_t parse_number(const std::string& text, std::int64_t low, std::int64_t high,
                          const std::string& what) {
  if (const auto value = core::parse_int_in_range(text, low, high)) return *value;
  invalid(what + "='" + text + "' is not a number in " + std::to_string(low) + ".." +
          std::to_string(high));
}

std::chrono::milliseconds parse_ms(const std::string& text, std::int64_t low, std::int64_t high,
                                   const std::string& what) {
  return std::chrono::milliseconds(parse_number(text, low, high, what));
}

}  // namespace

RedlockConfig parse_config(const core::Uri& uri, const ClientOptions& options) {
  if (uri.scheme != "redlock") invalid("scheme is '" + uri.scheme + "'");
  if (uri.hosts.empty()) invalid("no host");
  if (uri.hosts.size() > kMaxMasters) {
    invalid(std::to_string(uri.hosts.size()) + " masters; at most " + std::to_string(kMaxMasters));
  }
  if (uri.password && uri.password->empty()) invalid("empty password");
  if (uri.user && !uri.user->empty() && !uri.password) invalid("a user needs a password");

  RedlockConfig config;
  std::optional<int> db;
  if (!uri.path.empty()) db = static_cast<int>(parse_number(uri.path, 0, 1'000'000, "database"));
  for (const auto& [key, value] : uri.query) {
    if (core::is_tls_parameter(key)) continue;  // parse_tls_options below
    if (key == "node_timeout_ms") {
      config.node_timeout = parse_ms(value, 1, 60'000, key);
    } else if (key == "retry_count") {
      config.retry_count = static_cast<int>(parse_number(value, 0, 1'000, key));
    } else if (key == "retry_delay_ms") {
      config.retry_delay = parse_ms(value, 0, 60'000, key);
    } else if (key == "retry_jitter_ms") {
      config.retry_jitter = parse_ms(value, 0, 60'000, key);
    } else if (key == "pool") {
      config.pool_size = static_cast<std::size_t>(parse_number(value, 1, 64, key));
    } else {
      invalid("unknown parameter '" + key + "'");
    }
  }

  const core::TlsOptions tls = core::parse_tls_options(uri, "redlock");
  std::set<std::pair<std::string, std::uint16_t>> seen;
  for (const core::HostPort& host : uri.hosts) {
    if (host.host.empty()) invalid("empty host");
    if (host.port && *host.port == 0) invalid("port 0");
    resp_client::ConnectOptions master;
    master.host = host.host;
    master.port = host.port.value_or(redis::kDefaultPort);
    // The same master twice would count its vote twice.
    if (!seen.emplace(master.host, master.port).second) {
      invalid("master " + resp_client::endpoint_name(master.host, master.port) + " is given twice");
    }
    if (uri.user && !uri.user->empty()) master.user = uri.user;
    master.password = uri.password;
    master.db = db;
    master.timeout = config.node_timeout;
    master.tls = tls;
    config.masters.push_back(std::move(master));
  }
  config.op_timeout = options.op_timeout;
  config.reconnect = options.retry;
  return config;
}

RedlockConfig single_master_config(const redis::RedisConfig& redis, const ClientOptions& options) {
  RedlockConfig config;
  config.masters.push_back(redis.connect);
  config.node_timeout = options.op_timeout;
  config.pool_size = redis.pool_size;
  config.op_timeout = options.op_timeout;
  config.reconnect = options.retry;
  config.naming = KeyNaming::simple(redis.simple_lock_key.value_or(""));
  config.label = "redis (layout=simple)";
  return config;
}

}  // namespace warden::engines::redlock
