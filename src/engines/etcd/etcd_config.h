// engines/etcd/etcd_config.h — what an etcd:// URI and the ClientOptions say about
// talking to an etcd cluster.
//
//   etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/PREFIX]
//
//   USER, PASSWORD  etcd's user/password auth: Authenticate once per member, then the
//                   token on every call (renewed when the server says it expired)
//   HOST[:PORT]     the members to talk to, in order of preference (default port 2379);
//                   a member that does not answer within op_timeout, or that answers
//                   "unavailable" / "no leader", is left for the next one
//   PREFIX          the key prefix every lock lives under, default "warden"; %-escaped;
//                   no empty segments
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/uri.h"
#include "warden/options.h"

namespace warden::engines::etcd {

inline constexpr std::uint16_t kDefaultPort = 2379;
inline constexpr const char* kDefaultPrefix = "warden";

struct EtcdConfig {
  std::vector<std::string> endpoints;  // "host:port", gRPC target syntax
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::string prefix = kDefaultPrefix;  // without a trailing '/'
  std::chrono::milliseconds op_timeout{5'000};
  bool watchdog = true;
  // Reconnect back-off, and the waiters' re-reads between watch events.
  RetryPolicy retry;
};

// Validates `uri` (scheme "etcd") and combines it with `options`. Throws
// Error(invalid_argument) saying what is wrong; nothing is connected.
EtcdConfig parse_config(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::engines::etcd
