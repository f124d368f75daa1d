// support/postgres_server.h — a throwaway PostgreSQL 15 server for tests: initdb into a
// temp dir, then `postgres` on a free loopback port with its own unix socket dir,
// started and stopped by PID, and a libpq probe to look behind the engine's back.
//
// PostgreSQL refuses to run as root: when the tests run as root, initdb and postgres
// run as the `postgres` system user (setpriv, which execs, so the PID is the server's),
// and the temp dir is handed to that user. The cluster has one superuser, kSuperuser,
// with kPassword over TCP (scram-sha-256); fsync is off (kill -9 keeps every write, only
// a machine crash would not). Nothing here is thread-safe: one test thread drives it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/server_process.h"

namespace warden::testing {

class PostgresServer {
 public:
  static constexpr const char* kSuperuser = "warden";
  static constexpr const char* kPassword = "warden-secret";
  static constexpr const char* kDatabase = "postgres";

  // initdb and start; returns once the server accepts logins. Throws
  // std::runtime_error with the log's tail otherwise.
  PostgresServer();
  // An immediate shutdown (SIGKILL if it does not end); removes its shared memory, even
  // after a kill9(), and the temp dir.
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  std::uint16_t port() const { return port_; }
  // postgres://warden:warden-secret@127.0.0.1:PORT/postgres, then `query` ("?pool=2").
  std::string uri(const std::string& query = "") const;
  // The same with another user, password and database.
  std::string uri_as(const std::string& user, const std::string& password,
                     const std::string& database, const std::string& query = "") const;

  // kill -9 of the postmaster and its backends and workers at once, as a crash of the
  // machine would (backends left to notice their postmaster's death take seconds on a
  // loaded machine, holding its shared memory meanwhile).
  void kill9();
  // Starts it again on the same data dir and port (after kill9 or stop); returns once
  // it accepts logins.
  void start();
  ServerProcess& process() { return process_; }
  std::filesystem::path data_dir() const { return dir_.path() / "data"; }
  // The System V shared memory segment its postmaster.pid names (the last one started,
  // also after a kill), or -1 when there is none.
  int shared_memory_id() const;

  // Runs `sql` as the superuser on a connection of its own (the simple protocol, so
  // several statements may be given). Returns the last statement's rows, each a vector
  // of text values (NULL as ""). Throws std::runtime_error with the server's message.
  std::vector<std::vector<std::string>> query(const std::string& sql,
                                              const std::string& database = kDatabase) const;
  // The first value of the first row, or nullopt when there is no row.
  std::optional<std::string> value(const std::string& sql) const;

 private:
  std::vector<std::string> as_server_user(std::vector<std::string> argv) const;
  bool accepts_logins() const;

  TempDir dir_;
  std::uint16_t port_ = 0;
  ServerProcess process_;
};

// The pg_locks condition for the advisory lock of the registry row `id_sql` (an SQL
// expression of the lock's id), as the postgres:// engine takes it.
std::string pg_advisory_rows(const std::string& id_sql);

// SQL for the registry id of (group, name) in schema "warden", as the engine creates it.
std::string pg_lock_id_sql(const std::string& group, const std::string& name);

}  // namespace warden::testing
