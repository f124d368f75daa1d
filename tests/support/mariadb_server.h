// support/mariadb_server.h — a throwaway MariaDB server for tests: Debian's mariadbd on
// a free loopback port, its data dir (made once per test process by mariadb-install-db
// and copied) and socket in a temp dir of its own, stopped by PID on destruction.
//
// On every start it makes sure of the database "warden" and the account
// warden/secret with every right on it (and no global rights), which uri() names.
// query() talks to it as root over libmariadb directly, with no warden code in between,
// so tests can look behind the engine's back: read the registry, list the sessions
// waiting in GET_LOCK, kill a session, create accounts. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/server_process.h"

namespace warden::testing {

class MariaDbServer {
 public:
  // Starts mariadbd; throws std::runtime_error (with the log's tail) if it does not
  // come up.
  MariaDbServer();
  ~MariaDbServer();  // kill -9 if still running; removes the temp dir
  MariaDbServer(const MariaDbServer&) = delete;
  MariaDbServer& operator=(const MariaDbServer&) = delete;

  std::uint16_t port() const { return port_; }
  // "mysql://warden:secret@127.0.0.1:PORT/warden".
  std::string uri() const;
  // The same with another account and database.
  std::string uri_as(std::string_view user, std::string_view password,
                     std::string_view database = "warden") const;

  // Starts again on the same port and data dir (after kill9()); returns once it answers.
  void start();
  // kill -9: no shutdown work; the process is gone when it returns.
  void kill9();
  void pause();   // SIGSTOP
  void resume();  // SIGCONT
  bool running();
  ServerProcess& process() { return process_; }

  // Runs `sql` (several statements allowed) as root on a fresh session; returns the rows
  // of the last result set, NULL as nullopt. Throws std::runtime_error with the server's
  // message.
  using Row = std::vector<std::optional<std::string>>;
  std::vector<Row> query(const std::string& sql);
  // The same as another account (the engine's own sees only its own sessions).
  std::vector<Row> query_as(const std::string& user, const std::string& password,
                            const std::string& sql);
  // The first column of the first row, or nullopt (no row, or NULL).
  std::optional<std::string> scalar(const std::string& sql);

  // What the mysql:// engine keeps about (group, name) in database "warden": its
  // registry id (nullopt if never used), the session holding it (IS_USED_LOCK), and how
  // many sessions wait in GET_LOCK for it or are queued for its permits (warden_take: the
  // turnstile's holder and those waiting in GET_LOCK).
  std::optional<std::uint64_t> lock_id(std::string_view group, std::string_view name);
  std::optional<std::uint64_t> holder_session(std::string_view group, std::string_view name);
  std::size_t waiting_sessions(std::string_view group, std::string_view name);

 private:
  TempDir dir_;
  std::uint16_t port_ = 0;
  ServerProcess process_;
};

// X'…': bytes as an SQL hex literal.
std::string sql_hex(std::string_view bytes);

}  // namespace warden::testing
