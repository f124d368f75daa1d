// engines/redlock/redlock_config.h — what a redlock:// URI and the ClientOptions say
// about the N independent Redis masters of a Redlock.
//
//   redlock://[[USER]:PASSWORD@]HOST[:PORT],HOST[:PORT],...[/DB][?PARAMS]
//
//   HOST:PORT        1..16 masters, each given once (port default 6379); they must be
//                    independent servers — replicas of one another would void the
//                    quorum argument (docs/engines/redlock.md)
//   USER, PASSWORD   AUTH on every connection to every master; %-escaped
//   DB               SELECT DB on every connection
//   node_timeout_ms  bound on one master's part of a round, 1..60000, default 100; a
//                    round's bound is min(node_timeout_ms, ttl/10) so it stays far
//                    below the lease
//   retry_count      further attempts, 0..1000, default 3, when an attempt found too few
//                    masters reachable (any acquire), or split votes (a try)
//   retry_delay_ms   pause between attempts: uniform in [delay, delay + jitter];
//   retry_jitter_ms  0..60000 each, defaults 20 and 20
//   pool             connections per master, 1..64, default 16
//   tls=1, ca, cert, TLS to every master with the same files, read by
//   key, insecure    core/tls_options.h: TLS 1.2+, each master's certificate checked
//                    against its own host name (docs/engines/redlock.md)
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "core/uri.h"
#include "engines/redis/redis_config.h"
#include "engines/redlock/lock_keys.h"
#include "engines/resp_client/connection.h"
#include "warden/options.h"

namespace warden::engines::redlock {

inline constexpr std::size_t kMaxMasters = 16;

struct RedlockConfig {
  // One per master; connect.timeout = node_timeout.
  std::vector<resp_client::ConnectOptions> masters;
  std::chrono::milliseconds node_timeout{100};
  int retry_count = 3;
  std::chrono::milliseconds retry_delay{20};
  std::chrono::milliseconds retry_jitter{20};
  std::size_t pool_size = 16;
  std::chrono::milliseconds op_timeout{5'000};
  RetryPolicy reconnect;  // back-off of a master that refused a connection
  KeyNaming naming = KeyNaming::tagged();
  std::string label = "redlock";  // what error messages call the engine

  // Masters that must agree: N/2 + 1.
  std::size_t quorum() const { return masters.size() / 2 + 1; }
};

// Validates `uri` (scheme "redlock") and combines it with `options`. Throws
// Error(invalid_argument) saying what is wrong; nothing is connected.
RedlockConfig parse_config(const core::Uri& uri, const ClientOptions& options);

// redis://HOST…?layout=simple: the one server as the only master (a quorum of one), its
// keys named by the URI's lock_key template. A round is bounded by op_timeout (and a
// tenth of the TTL), as redis:// bounds a call.
RedlockConfig single_master_config(const redis::RedisConfig& redis, const ClientOptions& options);

}  // namespace warden::engines::redlock
