// engines/postgres/pg_config.h — what a postgres:// URI and the ClientOptions say about
// talking to a PostgreSQL server.
//
//   postgres://[USER[:PASSWORD]@]HOST[:PORT][/DATABASE][?schema=NAME&pool=N
//              &wait_sessions=N&tls=1&ca=FILE&cert=FILE&key=FILE&insecure=1]
//   (postgresql:// is the same)
//
//   USER, PASSWORD  the role to log in as; without them libpq's defaults apply
//                   (PGUSER, ~/.pgpass, the OS user)
//   HOST[:PORT]     one server (default port 5432)
//   DATABASE        the database whose advisory locks and registry are used; without
//                   it, libpq's default (the user's name)
//   schema          where the registry table, the token sequence and warden.fence()
//                   live, default "warden"; [A-Za-z_][A-Za-z0-9_]{0,62}
//   pool            idle connections kept for later acquires, 0..1000, default 8. Every
//                   held grant and every waiting acquire has a connection of its own;
//                   this bounds only the ones kept while unused
//   wait_sessions   asynchronous acquires holding a session at once, 1..10000, default
//                   64 (pg_waits.h): the others queue in the client, in the order asked,
//                   until one ends. Blocking acquires are not counted
//   tls, ca, cert, key, insecure
//                   read by core::parse_tls_options and handed to libpq: tls=1 is
//                   sslmode=verify-full (sslrootcert=ca), insecure=1 sslmode=require,
//                   cert+key the client certificate
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tls_options.h"
#include "core/uri.h"
#include "warden/options.h"

namespace warden::engines::postgres {

inline constexpr std::uint16_t kDefaultPort = 5432;
inline constexpr const char* kDefaultSchema = "warden";
inline constexpr std::size_t kDefaultPool = 8;
inline constexpr std::size_t kDefaultWaitSessions = 64;

struct PgConfig {
  std::string host;
  std::uint16_t port = kDefaultPort;
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::optional<std::string> database;
  std::string schema = kDefaultSchema;
  std::size_t pool = kDefaultPool;
  std::size_t wait_sessions = kDefaultWaitSessions;
  core::TlsOptions tls;
  std::chrono::milliseconds op_timeout{5'000};
  bool watchdog = true;

  // libpq's connection keywords and values, for PQconnectdbParams.
  std::vector<std::pair<std::string, std::string>> conninfo() const;
  // "postgres://USER@HOST:PORT/DATABASE", without the password, for messages.
  std::string describe() const;
};

// Validates `uri` (scheme "postgres" or "postgresql") and combines it with `options`.
// Throws Error(invalid_argument) saying what is wrong; nothing is connected and no file
// is opened.
PgConfig parse_config(const core::Uri& uri, const ClientOptions& options);

}  // namespace warden::engines::postgres
