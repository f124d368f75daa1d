#include "engines/postgres/pg_config.h"

#include <algorithm>
#include <string>

#include "warden/error.h"

namespace warden::engines::postgres {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(Errc::invalid_argument,
              "postgres:// URI: " + why +
                  " (expected postgres://[USER[:PASSWORD]@]HOST[:PORT][/DATABASE]"
                  "[?schema=NAME&pool=N&wait_sessions=N&tls=1&ca=FILE&cert=FILE&key=FILE])");
}

// A plain identifier, so it never needs quoting rules of its own in messages and docs.
bool valid_schema(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  const auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!letter(name.front())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

}  // namespace

PgConfig parse_config(const core::Uri& uri, const ClientOptions& options) {
  if (uri.scheme != "postgres" && uri.scheme != "postgresql") {
    invalid("scheme is '" + uri.scheme + "'");
  }
  if (uri.hosts.empty() || uri.hosts.front().host.empty()) invalid("no host");
  if (uri.hosts.size() > 1) invalid("more than one host (the engine talks to one server)");
  const core::HostPort& host = uri.hosts.front();
  if (host.port && *host.port == 0) invalid("port 0");
  if (uri.user && uri.user->empty()) invalid("empty user");
  if (uri.password && !uri.user) invalid("a password without a user");

  PgConfig config;
  for (const auto& [key, value] : uri.query) {
    if (core::is_tls_parameter(key)) continue;
    if (key == "schema") {
      if (!valid_schema(value)) {
        invalid("schema '" + value + "' is not an identifier [A-Za-z_][A-Za-z0-9_]{0,62}");
      }
      config.schema = value;
    } else if (key == "pool") {
      const auto pool = core::parse_int_in_range(value, 0, 1000);
      if (!pool) invalid("pool '" + value + "' is not a number in 0..1000");
      config.pool = static_cast<std::size_t>(*pool);
    } else if (key == "wait_sessions") {
      const auto sessions = core::parse_int_in_range(value, 1, 10'000);
      if (!sessions) invalid("wait_sessions '" + value + "' is not a number in 1..10000");
      config.wait_sessions = static_cast<std::size_t>(*sessions);
    } else {
      invalid("unknown parameter '" + key + "'");
    }
  }
  if (!uri.path.empty()) {
    if (uri.path.find('/') != std::string::npos)
      invalid("the database '" + uri.path + "' holds a '/'");
    if (uri.path.find('\0') != std::string::npos) invalid("the database name holds a NUL byte");
    config.database = uri.path;
  }
  for (const auto& part : {uri.user, uri.password}) {
    if (part && part->find('\0') != std::string::npos) invalid("the user info holds a NUL byte");
  }
  config.tls = core::parse_tls_options(uri, "postgres");
  config.host = host.host;
  config.port = host.port.value_or(kDefaultPort);
  config.user = uri.user;
  config.password = uri.password;
  config.op_timeout = options.op_timeout;
  config.watchdog = options.watchdog;
  return config;
}

std::vector<std::pair<std::string, std::string>> PgConfig::conninfo() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("host", host);
  out.emplace_back("port", std::to_string(port));
  if (user) out.emplace_back("user", *user);
  if (password) out.emplace_back("password", *password);
  if (database) out.emplace_back("dbname", *database);
  // libpq counts whole seconds and treats anything below 2 as 2.
  const auto seconds = std::max<std::int64_t>(2, (op_timeout.count() + 999) / 1000);
  out.emplace_back("connect_timeout", std::to_string(seconds));
  out.emplace_back("application_name", "warden");
  // Waits are bounded by the engine (lock_timeout set per statement for a timed wait,
  // cancels and give-ups of its own): a role's or database's statement_timeout or
  // lock_timeout, a common DBA setting, would end a wait for ever with an error.
  out.emplace_back("options", "-c statement_timeout=0 -c lock_timeout=0");
  // A peer that vanished without a FIN is noticed by the kernel, not only by the lease.
  out.emplace_back("keepalives", "1");
  out.emplace_back("keepalives_idle", "5");
  out.emplace_back("keepalives_interval", "2");
  out.emplace_back("keepalives_count", "3");
  if (tls.enabled) {
    out.emplace_back("sslmode", tls.insecure ? "require" : "verify-full");
    if (tls.ca_file) out.emplace_back("sslrootcert", *tls.ca_file);
    if (tls.cert_file) out.emplace_back("sslcert", *tls.cert_file);
    if (tls.key_file) out.emplace_back("sslkey", *tls.key_file);
  } else {
    out.emplace_back("sslmode", "disable");
  }
  return out;
}

std::string PgConfig::describe() const {
  return "postgres://" + (user ? *user + '@' : std::string()) + host + ':' + std::to_string(port) +
         '/' + database.value_or("");
}

}  // namespace warden::engines::postgres
