#include "engines/mysql/mysql_config.h"

#include <string>

#include "warden/error.h"

namespace warden::engines::mysql {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(Errc::invalid_argument, "mysql:// URI: " + why +
                                          " (expected mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
                                          "[?pool=N])");
}

bool database_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '-';
}

}  // namespace

MysqlConfig parse_config(const core::Uri& uri, const ClientOptions& options) {
  if (uri.scheme != "mysql") invalid("scheme is '" + uri.scheme + "'");
  if (uri.hosts.size() != 1) invalid("exactly one host, not " + std::to_string(uri.hosts.size()));
  if (uri.hosts[0].host.empty()) invalid("empty host");
  if (uri.hosts[0].port && *uri.hosts[0].port == 0) invalid("port 0");
  if (!uri.user || uri.user->empty()) invalid("no user");
  if (uri.path.empty()) invalid("no database");
  if (uri.path.size() > kMaxDatabase) {
    invalid("the database name '" + uri.path + "' is longer than " + std::to_string(kMaxDatabase) +
            " bytes (lock names on the server are warden:DATABASE:ID, at most 64 characters)");
  }
  for (const char c : uri.path) {
    if (!database_char(c)) {
      invalid("the database name '" + uri.path + "' may hold only [A-Za-z0-9_$-]");
    }
  }
  MysqlConfig config;
  for (const auto& [key, value] : uri.query) {
    if (key != "pool") invalid("unknown parameter '" + key + "'");
    const auto pool = core::parse_int_in_range(value, 2, 4096);
    if (!pool) invalid("pool must be an integer in 2..4096, not '" + value + "'");
    config.pool = static_cast<std::size_t>(*pool);
  }
  config.host = uri.hosts[0].host;
  config.port = uri.hosts[0].port.value_or(kDefaultPort);
  config.user = *uri.user;
  config.password = uri.password.value_or("");
  config.database = uri.path;
  config.op_timeout = options.op_timeout;
  config.watchdog = options.watchdog;
  return config;
}

}  // namespace warden::engines::mysql
