#include "engines/redis/redis_config.h"

#include <algorithm>
#include <string>

#include "core/tls_options.h"
#include "warden/error.h"

namespace warden::engines::redis {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(Errc::invalid_argument,
              "redis:// URI: " + why +
                  " (expected redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
                  "[?pool=N&waiter_ttl_ms=M][&tls=1&ca=FILE&cert=FILE&key=FILE])");
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
  if (uri.scheme != "redis") invalid("scheme is '" + uri.scheme + "'");
  if (uri.hosts.empty()) invalid("no host");
  if (uri.hosts.size() > 1) {
    invalid(
        "more than one host; redis:// is one Redis server (for several independent "
        "masters use redlock://)");
  }
  if (uri.password && uri.password->empty()) invalid("empty password");
  if (uri.user && !uri.user->empty() && !uri.password) invalid("a user needs a password");

  RedisConfig config;
  if (!uri.path.empty()) {
    config.connect.db = static_cast<int>(parse_number(uri.path, 0, 1'000'000, "database"));
  }
  for (const auto& [key, value] : uri.query) {
    if (core::is_tls_parameter(key)) continue;  // parse_tls_options below
    if (key == "pool") {
      config.pool_size = static_cast<std::size_t>(
          parse_number(value, 1, static_cast<std::int64_t>(kMaxPoolSize), "pool"));
    } else if (key == "waiter_ttl_ms") {
      config.waiter_ttl = std::chrono::milliseconds(
          parse_number(value, kMinWaiterTtl.count(), kMaxWaiterTtl.count(), "waiter_ttl_ms"));
    } else {
      invalid("unknown parameter '" + key + "'");
    }
  }
  config.connect.host = uri.hosts[0].host;
  config.connect.port = uri.hosts[0].port.value_or(kDefaultPort);
  if (uri.user && !uri.user->empty()) config.connect.user = uri.user;
  config.connect.password = uri.password;
  config.connect.timeout = options.op_timeout;
  config.connect.tls = core::parse_tls_options(uri, "redis");
  config.op_timeout = options.op_timeout;
  config.retry = options.retry;
  config.poll = options.retry;
  config.poll.max =
      std::max(std::chrono::milliseconds(1), std::min(config.poll.max, config.waiter_ttl / 3));
  config.poll.initial = std::min(config.poll.initial, config.poll.max);
  return config;
}

}  // namespace warden::engines::redis
