#include "engines/etcd/etcd_config.h"

#include <string>

#include "warden/error.h"

namespace warden::engines::etcd {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(Errc::invalid_argument,
              "etcd:// URI: " + why +
                  " (expected etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/PREFIX]"
                  "[?layout=warden|concurrency&tls=1&ca=FILE&cert=FILE&key=FILE])");
}

}  // namespace

EtcdConfig parse_config(const core::Uri& uri, const ClientOptions& options) {
  if (uri.scheme != "etcd") invalid("scheme is '" + uri.scheme + "'");
  if (uri.hosts.empty()) invalid("no host");
  for (const auto& [key, value] : uri.query) {
    if (key != "layout" && !core::is_tls_parameter(key)) {
      invalid("unknown parameter '" + key + "'");
    }
  }
  if (uri.user.has_value() != uri.password.has_value()) {
    invalid("a user needs a password and a password needs a user");
  }
  if (uri.user && (uri.user->empty() || uri.password->empty())) {
    invalid("empty user or password");
  }

  EtcdConfig config;
  if (const auto layout = uri.query.find("layout"); layout != uri.query.end()) {
    if (layout->second == "concurrency") {
      config.layout = Layout::concurrency;
      // etcdctl lock G/N names the lock "G/N": with no path there is no prefix.
      config.prefix.clear();
    } else if (layout->second != "warden") {
      invalid("layout '" + layout->second +
              "' is neither 'warden' (warden's own keys) nor 'concurrency' (etcd's "
              "concurrency.Mutex and etcdctl lock)");
    }
  }
  config.tls = core::parse_tls_options(uri, "etcd");
  if (config.tls.insecure) {
    // Debian 12's gRPC (1.51) skips certificate checks only through its experimental
    // TLS API; rather than depend on that for a test-only switch, it is refused.
    throw Error(Errc::unsupported,
                "etcd:// URI: insecure=1 is not supported by the etcd engine (gRPC checks "
                "the members' certificates always); give the CA that signed them with ca=FILE");
  }
  for (const core::HostPort& host : uri.hosts) {
    if (host.host.empty()) invalid("empty host");
    if (host.port && *host.port == 0) invalid("port 0");
    // gRPC target syntax: an IPv6 address keeps its brackets.
    const bool ipv6 = host.host.find(':') != std::string::npos;
    config.endpoints.push_back((ipv6 ? "[" + host.host + "]" : host.host) + ':' +
                               std::to_string(host.port.value_or(kDefaultPort)));
  }
  if (!uri.path.empty()) {
    std::string prefix = uri.path;
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    if (prefix.empty() || prefix.find("//") != std::string::npos || prefix.front() == '/') {
      invalid("the prefix '" + uri.path + "' has an empty segment");
    }
    if (prefix.find('\0') != std::string::npos) invalid("the prefix holds a NUL byte");
    config.prefix = std::move(prefix);
  }
  config.user = uri.user;
  config.password = uri.password;
  config.op_timeout = options.op_timeout;
  config.watchdog = options.watchdog;
  config.retry = options.retry;
  return config;
}

}  // namespace warden::engines::etcd
