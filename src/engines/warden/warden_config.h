// engines/warden/warden_config.h — what a warden:// URI and the ClientOptions say
// about talking to wardend.
//
//   warden://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][?pool=N][&TLS]
//   wardens://...  = warden://...?tls=1
//
//   USER      a named user of wardend --users: AUTH USER PASSWORD; %-escaped
//   PASSWORD  sent with AUTH on every connection (wardend --requirepass, or the user's);
//             %-escaped
//   HOST      a name, an IPv4 address or [IPv6]: one wardend, or several, the members of a
//             cell (wardend --cell): connections go to its leader (cell_locator.h)
//   PORT      default 7380
//   pool=N    at most N connections for acquires, 1..4096, default 64: each acquire
//             waiting on the server holds one; beyond N, acquirers wait for a free
//             connection before they queue on the server
//   TLS       tls=1[&ca=FILE][&cert=FILE&key=FILE][&insecure=1], read by
//             core/tls_options.h: TLS 1.2+, the server's certificate and host name
//             checked (docs/engines/warden.md; the server side is wardend --tls-listen)
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/uri.h"
#include "engines/resp_client/cluster_slots.h"
#include "engines/resp_client/connection.h"
#include "warden/options.h"

namespace warden::engines::wardend {

inline constexpr std::uint16_t kDefaultPort = 7380;
inline constexpr std::size_t kDefaultPoolSize = 64;
inline constexpr std::size_t kMaxPoolSize = 4096;

struct WardenConfig {
  resp_client::ConnectOptions connect;  // timeout = op_timeout
  std::size_t pool_size = kDefaultPoolSize;
  std::chrono::milliseconds op_timeout{5'000};
  RetryPolicy retry;  // reconnect back-off and retries during a restart embargo
  // A cell's members (two hosts or more); connect.host/port are then the first's, and
  // the engine reaches the leader through a CellLocator.
  std::vector<resp_client::Endpoint> cell;
};

// Validates `uri` (scheme "warden") and combines it with `options`. Throws
// Error(invalid_argument) saying what is wrong; nothing is connected.
WardenConfig parse_config(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::engines::wardend
