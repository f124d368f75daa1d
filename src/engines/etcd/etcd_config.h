// engines/etcd/etcd_config.h — what an etcd:// URI and the ClientOptions say about
// talking to an etcd cluster.
//
//   etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/PREFIX]
//          [?layout=warden|concurrency&tls=1&ca=FILE&cert=FILE&key=FILE]
//   etcds://… = etcd://…?tls=1
//
//   USER, PASSWORD  etcd's user/password auth: Authenticate once per member, then the
//                   token on every call (renewed when the server says it expired)
//   HOST[:PORT]     the members to talk to, in order of preference (default port 2379);
//                   a member that does not answer within op_timeout, or that answers
//                   "unavailable" / "no leader", is left for the next one
//   PREFIX          the key prefix every lock lives under, default "warden" (none with
//                   layout=concurrency); %-escaped; no empty segments
//   layout          where a lock's keys are and what they say (lock_keys.h):
//                   warden (default): warden's own read-write queue, with semaphores
//                   and elections;
//                   concurrency: etcd's own lock layout (concurrency.Mutex, v3lock,
//                   `etcdctl lock PREFIX/GROUP/NAME`), so warden and those exclude each
//                   other; exclusive locks only (shared mode, semaphores and elections
//                   are refused as unsupported); a request is on the session lease
//                   unless another of the Client's is on the same lock (sessions.h)
//   tls, ca, cert, key
//                   gRPC over TLS, read by core::parse_tls_options: the members'
//                   certificates are checked against ca (the system's roots without it),
//                   including that they name the host of the URI; cert+key is the
//                   client certificate for members run with --client-cert-auth.
//                   insecure=1 is refused (unsupported): gRPC 1.51's only way to skip
//                   verification is its experimental TLS API; tests give ca= instead
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/tls_options.h"
#include "core/uri.h"
#include "engines/etcd/lock_keys.h"
#include "warden/options.h"

namespace warden::engines::etcd {

inline constexpr std::uint16_t kDefaultPort = 2379;
inline constexpr const char* kDefaultPrefix = "warden";

struct EtcdConfig {
  std::vector<std::string> endpoints;  // "host:port", gRPC target syntax
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::string prefix = kDefaultPrefix;  // without a trailing '/'; empty: none (concurrency)
  Layout layout = Layout::warden;
  core::TlsOptions tls;  // never insecure
  std::chrono::milliseconds op_timeout{5'000};
  bool watchdog = true;
  // Reconnect back-off, and the waiters' re-reads between watch events.
  RetryPolicy retry;
};

// Validates `uri` (scheme "etcd") and combines it with `options`. Throws
// Error(invalid_argument) saying what is wrong (an unknown layout= too), Error(unsupported) for
// insecure=1; nothing is connected and no file is opened.
EtcdConfig parse_config(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::engines::etcd
