// server/server.h — wardend: the Dispatcher behind a TCP socket.
//
// One thread runs one asio event loop that owns the dispatcher and the lock table: no
// locks on the hot path. Requests are pipelined per connection; a parked ACQUIRE stops
// reading from its connection until it is granted or times out (like Redis' BLPOP).
// A steady timer fires at the table's next wake-up (lease expiry, wait deadline,
// lock-delay end). The optional metrics endpoint runs on its own thread and asks the
// loop for a snapshot. An optional TLS listener (tls_context.h) feeds the same loop and
// dispatcher: its connections differ only in how bytes are read and written.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/dispatcher.h"

namespace warden::server {

// A TLS listener (`--tls-listen` and friends; see server/tls_context.h).
struct TlsListenOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: pick a free port (see Server::tls_port())
  std::string cert_file;   // PEM: the server's certificate, then any intermediates
  std::string key_file;    // PEM: its private key
  std::string ca_file;     // PEM: CAs whose clients are admitted; empty: no client certs
  // A client that has not finished its handshake by then is closed: one that connects
  // and says nothing must not hold a connection slot for ever.
  std::chrono::milliseconds handshake_timeout{10'000};
};

struct ServerOptions {
  std::string host = "127.0.0.1";       // listen address; 127.0.0.1 unless told otherwise
  std::uint16_t port = 7380;            // 0: pick a free port (see Server::port())
  bool listen_plain = true;             // false (`--listen none`): only the TLS listener
  std::optional<TlsListenOptions> tls;  // a TLS listener beside (or instead of) the plain one
  std::string data_dir = "./data";
  bool reset_state = false;    // start fresh even if the data dir lost its state (dangerous)
  std::string password;        // non-empty: clients must AUTH first
  std::string users_file;      // non-empty: named users (users_file.h), reloaded on SIGHUP
  bool hash_password = false;  // command line only: print a password hash and exit
  std::string metrics_listen;  // "host:port" for Prometheus text over HTTP; empty: off
  Limits limits;
  std::size_t max_request_bytes = 64 * 1024;
  // Replies pending to a client that does not read: past this, wardend stops reading its
  // requests. Pushes (REVOKE, CHANGED) come unasked, so a push that takes a connection's
  // pending output past it closes the connection instead (as Redis closes a pub/sub
  // client past its output limit): the client sees its channel broken.
  std::size_t max_output_bytes = 4 * 1024 * 1024;
  // A connection that has not authenticated this long after it was accepted is closed
  // (only when AUTH is required): silent connections must not hold every slot.
  std::chrono::milliseconds auth_timeout{10'000};
  // A connection that sent nothing for this long is closed, unless a request of it is
  // waiting; 0: never. warden:// clients renew and ping well within a minute.
  std::chrono::seconds idle_timeout{0};
  // TCP keep-alive on every accepted socket, first probe after this much silence (then
  // every 10 s, 3 probes): a client whose host vanished is found and closed; 0: off.
  std::chrono::seconds tcp_keepalive{60};
  // A member of a cell (docs/cell.md): `cell` lists every member as id@a.b.c.d:port,
  // `node` says which one this is; it then listens on that address, keeps its log in
  // data_dir/cell, and host and port above are not used. Empty: a single wardend.
  std::string cell;
  std::uint64_t node = 0;
  std::chrono::milliseconds cell_election_timeout{1000};
  std::chrono::milliseconds cell_heartbeat{100};
  bool cell_join = false;  // added to a running cell: do not bootstrap `cell`
};

class Server {
 public:
  // Opens the data dir and binds the sockets. Throws warden::Error with a clear message
  // (damaged state file, address in use, ...).
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Runs the event loop until stop() or SIGINT/SIGTERM (if handle_signals).
  void run(bool handle_signals = true);
  // Thread-safe: closes the listener and every connection, then run() returns.
  void stop();
  // Thread-safe: reads --users again on the loop, as SIGHUP does. A bad file keeps the
  // table in use; either way one line on stderr says what happened.
  void reload_users();

  std::uint16_t port() const;          // 0 when there is no plain-text listener
  std::uint16_t tls_port() const;      // 0 when there is no TLS listener
  std::uint16_t metrics_port() const;  // 0 when off

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace warden::server
