// engines/zookeeper/zk_config.h — what a zk:// URI and the ClientOptions say about
// talking to a ZooKeeper ensemble.
//
//   zk://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/PREFIX][?session_timeout_ms=N&on_suspend=lose|wait&layout=warden|curator]
//
//   USER, PASSWORD      digest auth (zoo_add_auth "digest", "USER:PASSWORD"); the nodes
//                       warden creates then carry an ACL that gives every permission to
//                       these credentials only, and read to everyone; %-escaped
//   HOST[:PORT]         the ensemble's servers (default port 2181); the C client picks
//                       one and moves to another when it stops answering
//   PREFIX              the node every lock lives under, default "warden" (with
//                       layout=curator: none, locks are /GROUP/NAME); %-escaped
//   session_timeout_ms  the session timeout asked for, 1000..600000, default 10000 (the
//                       server clamps it to 2..20 of its ticks)
//   on_suspend          what a held lease does while the connection is lost but the
//                       session may live: "lose" (default) — reported lost at once, its
//                       node deleted once the connection is back; "wait" — kept while
//                       its conservative expiry allows (see docs/engines/zookeeper.md)
//   layout              how request nodes are named (lock_nodes.h): "warden" (default),
//                       or "curator" — Curator's InterProcessMutex / ReadWriteLock names
//                       (_c_UUID-lock-SEQ, _c_UUID-__READ__SEQ), the lock node named by
//                       the lock name as it is, kazoo's __lock__/__rlock__ nodes counted
//                       as requests; no semaphores or elections (see
//                       docs/engines/zookeeper.md, Layout `curator`)
//   tls=1               refused (unsupported): Debian's C client has no TLS; the message
//                       says how to tunnel. tls=0 is accepted; ca/cert/key/insecure
//                       without tls=1 are invalid_argument (core/tls_options.h)
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "core/uri.h"
#include "engines/zookeeper/lock_nodes.h"
#include "warden/options.h"

namespace warden::engines::zookeeper {

inline constexpr std::uint16_t kDefaultPort = 2181;
inline constexpr std::chrono::milliseconds kDefaultSessionTimeout{10'000};

struct ZkConfig {
  std::string hosts;  // "h1:p1,h2:p2": the C client's connect string (no chroot)
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::string prefix = "/warden";  // absolute, no trailing '/'; "" (the root): curator only
  Layout layout = Layout::warden;
  std::chrono::milliseconds session_timeout = kDefaultSessionTimeout;
  bool lose_on_suspend = true;
  std::chrono::milliseconds op_timeout{5'000};
  bool watchdog = true;
  RetryPolicy retry;  // the waiters' re-reads between watch events
};

// Validates `uri` (scheme "zk") and combines it with `options`. Throws
// Error(invalid_argument) saying what is wrong, Error(unsupported) for tls=1; nothing is
// connected.
ZkConfig parse_config(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::engines::zookeeper
