// support/redis_server.h — a throwaway redis-server for tests: a free loopback port, a
// temp dir of its own, no persistence unless asked, stopped by PID on destruction.
// With RedisOptions::tls it also listens for TLS on a second port (Debian's
// redis-server is built with TLS); the plain port stays open for probes and for tests
// that connect to it on purpose.
//
// RedisProbe talks to it directly (hiredis, no warden code in between) so tests can look
// behind the engine's back: scan the keyspace, kill clients, read a key.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/server_process.h"

struct redisReply;

namespace warden::testing {

// The TLS side of a RedisServer: its certificate and key, and the CA it checks client
// certificates against (support/test_certs.h makes them).
struct RedisTlsOptions {
  std::filesystem::path cert;
  std::filesystem::path key;
  std::filesystem::path ca;
  // tls-auth-clients: true, clients must present a certificate signed by `ca`; false,
  // they need none.
  bool auth_clients = false;
};

struct RedisOptions {
  // Require this password for the default user (requirepass).
  std::optional<std::string> password;
  // Also create an ACL user with this name and password that may run everything.
  std::optional<std::string> acl_user;
  std::optional<std::string> acl_password;
  // Append-only file with fsync always, so a restart keeps the data. Off: a restart
  // starts empty.
  bool persistence = false;
  // Also listen for TLS (--tls-port) with these files.
  std::optional<RedisTlsOptions> tls;
  // More redis-server arguments, appended as given (e.g. --replicaof HOST PORT).
  std::vector<std::string> extra_args;
};

class RedisServer {
 public:
  // Starts redis-server; throws std::runtime_error if it does not come up.
  explicit RedisServer(RedisOptions options = {});
  ~RedisServer();  // kill -9 if still running; removes the temp dir
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  std::uint16_t port() const { return port_; }
  // "redis://127.0.0.1:PORT", with "user:password@" / ":password@" when the server has
  // a password (the ACL user when there is one).
  std::string uri() const;
  // Always without credentials.
  std::string bare_uri() const;
  // The TLS port (0 without RedisOptions::tls).
  std::uint16_t tls_port() const { return tls_port_; }
  // "rediss://[credentials@]HOST:TLS_PORT?ca=CA": the TLS port, trusting the CA the
  // server's options name; `query` ("cert=...&key=...") is appended with '&'.
  std::string tls_uri(std::string_view host = "127.0.0.1", std::string_view query = "") const;

  // Starts again on the same port and dir (after kill9()); returns once PING answers,
  // so a persistent server has finished loading its data.
  void start();
  // kill -9: no shutdown work, no final save; the process is gone when it returns.
  void kill9();
  // SIGSTOP / SIGCONT.
  void pause();
  void resume();
  bool running();

  ServerProcess& process() { return process_; }
  const RedisOptions& options() const { return options_; }

 private:
  RedisOptions options_;
  TempDir dir_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  ServerProcess process_;
};

// A direct hiredis connection to a RedisServer (authenticated as the server's
// options say). Every call throws std::runtime_error when Redis cannot be reached or
// answers unexpectedly (command() returns an error reply as text instead); a call that
// finds the connection broken (the server was restarted) reconnects once first.
// `timeout` bounds the connect and each reply (a SIGSTOPped server accepts connections
// but never answers), so a call gives up after at most about 3 * timeout.
class RedisProbe {
 public:
  explicit RedisProbe(const RedisServer& server,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~RedisProbe();
  RedisProbe(const RedisProbe&) = delete;
  RedisProbe& operator=(const RedisProbe&) = delete;

  // Every key name in `db` (SCAN, not KEYS), sorted.
  std::vector<std::string> keys(int db = 0);
  // Keys in `db` whose names contain `{warden:` — those the Redis engine made.
  std::vector<std::string> warden_keys(int db = 0);
  // Runs one command; the reply as text: status/bulk text, integer as decimal, nil as
  // "(nil)", an error as "(error) ...", an array as its elements joined by '\n'.
  std::string command(const std::vector<std::string>& args);
  // CLIENT KILL TYPE pubsub: drops every subscriber connection; returns how many.
  long long kill_pubsub_clients();
  // CLIENT KILL TYPE normal (all but this probe's own connection).
  long long kill_normal_clients();

 private:
  void* reply(const std::vector<std::string>& args);  // a redisReply the caller frees
  long long integer(const std::vector<std::string>& args);

  std::uint16_t port_;
  RedisOptions options_;
  std::chrono::milliseconds timeout_;
  void* context_ = nullptr;  // redisContext; null after a broken connection
};

// The hash tag that every key the redis:// engine keeps for the lock (group, name)
// starts with: "{warden:GROUP/NAME}", then ":h", ":i", ":q", ":w", ":p" (and the
// channel ":c"); see src/engines/redis/lua/lock_base.lua.
inline std::string lock_tag(std::string_view group, std::string_view name) {
  std::string tag = "{warden:";
  tag += group;
  tag += '/';
  tag += name;
  tag += '}';
  return tag;
}

// A hiredis reply as RedisProbe::command shows it: status/bulk text, an integer in
// decimal, nil as "(nil)", an error as "(error) ...", an array's elements joined by '\n'.
std::string reply_text(const redisReply* reply);

// One command to the server on 127.0.0.1:`port` (a data node or a sentinel) over a fresh
// connection without AUTH; the reply as reply_text shows it. Throws std::runtime_error if
// it cannot connect or gets no reply within `timeout`.
std::string redis_command(std::uint16_t port, const std::vector<std::string>& args,
                          std::chrono::milliseconds timeout = std::chrono::seconds(5));

// Path of redis-server (found on PATH, or /usr/bin/redis-server).
std::string redis_server_path();

}  // namespace warden::testing
