#include "engines/warden/warden_config.h"

#include <charconv>
#include <string>

#include "core/tls_options.h"
#include "warden/error.h"

namespace warden::engines::wardend {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw Error(Errc::invalid_argument,
              "warden:// URI: " + why +
                  " (expected warden://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]"
                  "[?pool=N][&tls=1&ca=FILE&cert=FILE&key=FILE])");
}

std::size_t parse_pool(const std::string& text) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value == 0 ||
      value > kMaxPoolSize) {
    invalid("pool='" + text + "' is not a number in 1.." + std::to_string(kMaxPoolSize));
  }
  return value;
}

}  // namespace

WardenConfig parse_config(const core::Uri& uri, const ClientOptions& options) {
  if (uri.scheme != "warden") invalid("scheme is '" + uri.scheme + "'");
  if (uri.hosts.empty()) invalid("no host");
  if (uri.password && uri.password->empty()) invalid("empty password");
  // A user (wardend --users) is sent as AUTH USER PASSWORD; without one, AUTH PASSWORD.
  if (uri.user && !uri.user->empty() && !uri.password) invalid("a user needs a password");
  if (!uri.path.empty()) invalid("unexpected path '/" + uri.path + "'");

  WardenConfig config;
  for (const auto& [key, value] : uri.query) {
    if (core::is_tls_parameter(key)) continue;  // parse_tls_options below
    if (key == "pool") {
      config.pool_size = parse_pool(value);
    } else {
      invalid("unknown parameter '" + key + "'");
    }
  }
  config.connect.host = uri.hosts[0].host;
  config.connect.port = uri.hosts[0].port.value_or(kDefaultPort);
  if (uri.hosts.size() > 1) {
    for (const auto& host : uri.hosts) {
      const resp_client::Endpoint member{host.host, host.port.value_or(kDefaultPort)};
      for (const auto& seen : config.cell) {
        if (seen == member) invalid("member " + member.to_string() + " is given twice");
      }
      config.cell.push_back(member);
    }
  }
  if (uri.user && !uri.user->empty()) config.connect.user = uri.user;
  config.connect.password = uri.password;
  config.connect.timeout = options.op_timeout;
  config.connect.tls = core::parse_tls_options(uri, "warden");
  config.op_timeout = options.op_timeout;
  config.retry = options.retry;
  return config;
}

}  // namespace warden::engines::wardend
