// engines/redis/redis_config.h — what a redis:// URI and the ClientOptions say about
// talking to one Redis server.
//
//   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?pool=N&waiter_ttl_ms=M][&TLS]
//   rediss://...  = redis://...?tls=1
//   redis+sentinel://[[USER]:PASSWORD@]S1[:PORT],S2,.../MASTER[/DB][?...]
//                   the master named MASTER, found from the sentinels S1, S2, ... (port
//                   default 26379); USER and PASSWORD are the data nodes'; the sentinels'
//                   own AUTH by sentinel_user=U&sentinel_password=P
//   redis+cluster://[[USER]:PASSWORD@]H1[:PORT],H2,...[?...]
//                   a Redis Cluster, found from any of the nodes H1, H2, ... (port
//                   default 6379); each lock lives on the master of its hash tag's slot;
//                   no DB (a cluster has database 0 only), no min_replicas (not offered
//                   on a cluster)
//
//   USER, PASSWORD  AUTH [USER] PASSWORD on every connection (Redis 6 ACL user, or the
//                   default user's requirepass when USER is empty); %-escaped
//   HOST            a name, an IPv4 address or [IPv6]; exactly one
//   PORT            default 6379
//   DB              SELECT DB on every connection, 0..15 by default Redis config
//   pool=N          N pipelined connections for lock calls (per master, in a
//                   cluster), 1..64, default 2
//   wait_lines=N    at most N of a Client's waiters at a time each block on a connection
//                   of their own, which makes a hand-off one round trip
//                   (wait_lines.h); the others wait on the Client's subscriber.
//                   0..256, default 32; 0: every waiter waits on the subscriber. Not on
//                   redis+cluster://, whose waiters all wait on their lock's master's
//                   subscriber
//   waiter_ttl_ms=M how long a waiter stays queued without refreshing its place, 100 ..
//                   600000, default 3000: a waiter whose process died is evicted after
//                   at most M ms; live waiters refresh every M/3
//   min_replicas=N  every grant, renewal and release is followed by WAIT N in the same
//                   round trip; a grant fewer than N replicas acknowledged in time is
//                   released again (1..16; default 0: no WAIT)
//   replica_timeout_ms=M  WAIT's timeout, 1..60000, default 500
//   layout=simple   the classic one-key lock that redis-py's Lock and most SET NX PX
//                   locks use: exclusive, non-fair, the lock (G, N) on the key G:N,
//                   served by the redlock engine with this server as its only master
//                   (engines/redlock/lock_keys.h). redis:// only; not with wait_lines,
//                   waiter_ttl_ms, min_replicas or replica_timeout_ms, which are about
//                   warden's queue. layout=queue, the default, is warden's own
//   lock_key=T      with layout=simple: the lock's key, T with {group} and {name}
//                   replaced; default {group}:{name}
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/uri.h"
#include "engines/resp_client/cluster_slots.h"
#include "engines/resp_client/connection.h"
#include "engines/resp_client/master_locator.h"
#include "warden/options.h"

namespace warden::engines::redis {

inline constexpr std::uint16_t kDefaultPort = 6379;
inline constexpr std::uint16_t kDefaultSentinelPort = 26379;
inline constexpr std::size_t kDefaultPoolSize = 2;
inline constexpr std::size_t kMaxPoolSize = 64;
inline constexpr std::size_t kDefaultWaitLines = 32;
inline constexpr std::size_t kMaxWaitLines = 256;
inline constexpr std::chrono::milliseconds kDefaultWaiterTtl{3'000};
inline constexpr std::chrono::milliseconds kMinWaiterTtl{100};
inline constexpr std::chrono::milliseconds kMaxWaiterTtl{600'000};

struct RedisConfig {
  resp_client::ConnectOptions connect;  // timeout = op_timeout
  // redis+sentinel://: where to find the master (connect.host/port are then unused).
  std::optional<resp_client::SentinelOptions> sentinel;
  // Made from `sentinel` when the engine opens; connect.locator is the same one.
  std::shared_ptr<resp_client::MasterLocator> master;
  // redis+cluster://: the nodes to learn the cluster from (connect.host/port unused).
  std::vector<resp_client::Endpoint> cluster_seeds;
  std::size_t pool_size = kDefaultPoolSize;
  std::size_t wait_lines = kDefaultWaitLines;  // 0 in a cluster
  std::chrono::milliseconds waiter_ttl = kDefaultWaiterTtl;
  int min_replicas = 0;
  std::chrono::milliseconds replica_timeout{500};
  std::chrono::milliseconds op_timeout{5'000};
  // Reconnect back-off, and the waiters' polling between messages (its max capped at
  // waiter_ttl / 3 so a waiter refreshes its place in time).
  RetryPolicy retry;
  RetryPolicy poll;
  // layout=simple: the template of the lock's key (lock_key=, or "{group}:{name}").
  std::optional<std::string> simple_lock_key;
};

// Validates `uri` (scheme "redis") and combines it with `options`. Throws
// Error(invalid_argument) saying what is wrong; nothing is connected.
RedisConfig parse_config(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::engines::redis
