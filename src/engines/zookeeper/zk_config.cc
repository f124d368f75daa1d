#include "engines/zookeeper/zk_config.h"

#include <string>

#include "core/tls_options.h"
#include "warden/error.h"

namespace warden::engines::zookeeper {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(Errc::invalid_argument,
              "zk:// URI: " + why +
                  " (expected zk://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/PREFIX]"
                  "[?session_timeout_ms=N&on_suspend=lose|wait&layout=warden|curator])");
}

std::int64_t parse_number(const std::string& text, std::int64_t low, std::int64_t high,
                          const std::string& what) {
  if (const auto value = core::parse_int_in_range(text, low, high)) return *value;
  invalid(what + "='" + text + "' is not a number in " + std::to_string(low) + ".." +
          std::to_string(high));
}

// A path segment ZooKeeper accepts as it is: no '/' (segments are split on it), not "."
// or "..", printable ASCII only.
bool valid_segment(const std::string& segment) {
  if (segment.empty() || segment == "." || segment == "..") return false;
  for (const char c : segment) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

ZkConfig parse_config(const core::Uri& uri, const ClientOptions& options) {
  if (uri.scheme != "zk") invalid("scheme is '" + uri.scheme + "'");
  if (uri.hosts.empty()) invalid("no host");
  if (uri.user.has_value() != uri.password.has_value()) {
    invalid("a user needs a password and a password needs a user");
  }
  if (uri.user && (uri.user->empty() || uri.password->empty())) invalid("empty user or password");
  if (uri.user && uri.user->find(':') != std::string::npos) invalid("a user name cannot hold ':'");

  // ca/cert/key/insecure without tls=1 are the shared invalid_argument; tls=1 itself is
  // refused below, whatever else the URI says.
  if (core::parse_tls_options(uri, "zk").enabled) {
    throw Error(Errc::unsupported,
                "zk:// URI: tls=1 is not supported: Debian's ZooKeeper C client "
                "(libzookeeper_mt 3.8) is built without TLS (it has no zookeeper_init_ssl). "
                "Tunnel it instead: stunnel in client mode to the servers' secureClientPort, "
                "or ssh -L 2181:localhost:2181 to a server's plain port on its own loopback, "
                "then zk://127.0.0.1:2181; or run the client next to the server (see "
                "docs/engines/zookeeper.md)");
  }

  ZkConfig config;
  for (const core::HostPort& host : uri.hosts) {
    if (host.host.empty()) invalid("empty host");
    if (!config.hosts.empty()) config.hosts += ',';
    const bool ipv6 = host.host.find(':') != std::string::npos;
    config.hosts += (ipv6 ? "[" + host.host + "]" : host.host) + ':' +
                    std::to_string(host.port.value_or(kDefaultPort));
  }
  if (!uri.path.empty()) {
    std::string prefix;
    std::size_t start = 0;
    std::string path = uri.path;
    while (!path.empty() && path.back() == '/') path.pop_back();
    while (start <= path.size()) {
      const auto slash = path.find('/', start);
      const std::string segment =
          path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (!valid_segment(segment)) invalid("the prefix '" + uri.path + "' has an invalid segment");
      prefix += '/' + segment;
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    config.prefix = prefix;
  }
  for (const auto& [key, value] : uri.query) {
    if (core::is_tls_parameter(key)) continue;  // tls=0: read above
    if (key == "session_timeout_ms") {
      config.session_timeout =
          std::chrono::milliseconds(parse_number(value, 1'000, 600'000, "session_timeout_ms"));
    } else if (key == "on_suspend") {
      if (value != "lose" && value != "wait")
        invalid("on_suspend='" + value + "' is not lose or wait");
      config.lose_on_suspend = value == "lose";
    } else if (key == "layout") {
      if (value != "warden" && value != "curator") {
        invalid("layout='" + value + "' is not warden or curator");
      }
      config.layout = value == "curator" ? Layout::curator : Layout::warden;
    } else {
      invalid("unknown parameter '" + key + "'");
    }
  }
  // Curator and kazoo take the lock's whole path: without a path in the URI, a
  // layout=curator lock is /GROUP/NAME, not under warden's own /warden.
  if (config.layout == Layout::curator && uri.path.empty()) config.prefix.clear();
  config.user = uri.user;
  config.password = uri.password;
  config.op_timeout = options.op_timeout;
  config.watchdog = options.watchdog;
  config.retry = options.retry;
  return config;
}

}  // namespace warden::engines::zookeeper
