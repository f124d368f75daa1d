// engines/mysql/mysql_config.h — what a mysql:// URI and the ClientOptions say about
// talking to one MariaDB server.
//
//   mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?pool=N]
//
//   USER, PASSWORD  the account warden logs in as (mysql_native_password or ed25519)
//   HOST[:PORT]     one server (default port 3306); a replica set or Galera cluster is
//                   not followed: GET_LOCK locks live on one server only
//   DATABASE        where the registry (warden_locks, warden_fences) and the stored
//                   function warden_fence() live; [A-Za-z0-9_$-], 1..36 bytes, because
//                   every lock name on the server is "warden:DATABASE:ID" and MySQL caps
//                   lock names at 64 characters
//   pool            most connections one client opens (held grants, waits and the
//                   short control queries together); default 64, 2..4096. Each held
//                   lock keeps one connection: it is the lease.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/uri.h"
#include "warden/options.h"

namespace warden::engines::mysql {

inline constexpr std::uint16_t kDefaultPort = 3306;
inline constexpr std::size_t kDefaultPool = 64;
// "warden:" + DATABASE + ":" + a 20-digit id must fit MySQL's 64-character lock names.
inline constexpr std::size_t kMaxDatabase = 36;

struct MysqlConfig {
  std::string host;
  std::uint16_t port = kDefaultPort;
  std::string user;
  std::string password;  // may be empty (an account without a password)
  std::string database;
  std::size_t pool = kDefaultPool;
  std::chrono::milliseconds op_timeout{5'000};
  bool watchdog = true;

  // "warden:DATABASE:" — every lock name on the server starts with it.
  std::string lock_prefix() const { return "warden:" + database + ':'; }
};

// Validates `uri` (scheme "mysql") and combines it with `options`. Throws
// Error(invalid_argument) saying what is wrong; nothing is connected.
MysqlConfig parse_config(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::engines::mysql
