// engines/resp_client/connection.h — one RESP connection (hiredis underneath) whose
// every blocking step is bounded by a deadline.
//
// The socket is non-blocking; waits are poll(2) calls with a deadline, so no call can
// hang: connect, the TLS handshake and AUTH are bounded by ConnectOptions::timeout,
// writes and reads by the deadline the caller passes. hiredis connects; bytes then go
// through a Transport (transport.h: send/recv, or TLS with OpenSSL, tls_transport.h),
// never raising SIGPIPE, and replies are decoded by hiredis' reader. Any transport
// failure throws warden::Error (see errors.h, tls_transport.h) and marks the connection
// broken.
//
// Pipelining: append() any number of commands, flush() once, then read one reply per
// command, in order.
//
// Thread safety: none. One thread uses a connection at a time (Pool and Pipeline hand
// them out that way).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tls_options.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/reply.h"
#include "warden/types.h"

struct redisContext;

namespace warden::engines::resp_client {

// One command: its arguments, binary-safe ("SET", key, value, ...).
using Command = std::vector<std::string>;

class ServerLocator;

struct ConnectOptions {
  std::string host;  // a name or an IPv4/IPv6 address
  std::uint16_t port = 0;
  // Sent as AUTH [user] password right after connecting when set. Redis 6 ACLs take a
  // user, and so do wardend's named users (--users).
  std::optional<std::string> user;
  std::optional<std::string> password;
  // Sent as SELECT db after AUTH when set (Redis logical databases).
  std::optional<int> db;
  // Bound for connecting, the TLS handshake and AUTH. Must be positive.
  std::chrono::milliseconds timeout{5'000};
  // TLS (core/tls_options.h); tls.enabled false: plain TCP.
  core::TlsOptions tls;
  // A server that moves (a master behind Redis Sentinel, a wardend cell's leader): host
  // and port are then the server's as the locator finds it, and one that does not serve
  // is refused (server_locator.h). Used by open_connection(), not by Connection::open.
  std::shared_ptr<ServerLocator> locator;
};

// "host:port", or "[v6-address]:port".
std::string endpoint_name(const std::string& host, std::uint16_t port);

class Transport;
class TlsContext;

class Connection {
 public:
  // Connects (TLS handshake, if options.tls.enabled; then authenticates, and selects the
  // db) within options.timeout. `tls` is the context its Connector built from
  // options.tls, shared by its connections; without one, a TLS connection builds its own.
  // Throws Error: unavailable if the server cannot be reached or does not speak TLS,
  // deadline_exceeded if it accepts but does not answer AUTH in time,
  // permission_denied if it refuses the password, if its certificate is rejected, if it
  // refuses our client certificate, or if a TLS file cannot be used; invalid_argument if
  // it has no such db.
  static std::unique_ptr<Connection> open(const ConnectOptions& options,
                                          std::shared_ptr<const TlsContext> tls = nullptr);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Encodes one command (binary-safe arguments) into the output buffer; no I/O.
  void append(std::span<const std::string_view> args);
  void append(std::span<const std::string> args);

  // Writes the output buffer. Throws Error(deadline_exceeded) if the socket does not
  // take it all by `deadline`, Error(unavailable) if the connection fails.
  void flush(Clock::time_point deadline);

  // The next reply if one arrives by `until` (Clock::time_point::max(): no limit), or
  // nullopt if none did — the connection stays usable, so callers can wait in slices.
  // Also returns nullopt early, without a reply, once `wake_fd` (if >= 0) becomes
  // readable. Throws Error(unavailable) if the peer closed or the read failed,
  // Error(internal) for bytes that are not RESP.
  std::optional<Reply> poll_reply(Clock::time_point until, int wake_fd = -1);

  // The next reply, by `deadline`. Throws like poll_reply, and Error(deadline_exceeded)
  // (marking the connection broken) if none arrives in time.
  Reply read_reply(Clock::time_point deadline);

  // append + flush + read_reply, all by `deadline`.
  Reply command(std::span<const std::string_view> args, Clock::time_point deadline);
  Reply command(std::span<const std::string> args, Clock::time_point deadline);

  // Half-closes the connection (shutdown(SHUT_WR)): the server sees end-of-input while
  // we can still read its replies. The connection is broken afterwards.
  void shutdown_write();

  // true after a transport failure or shutdown_write(): it must not be used again for
  // new requests (a pool drops it). Replies can still be read after shutdown_write().
  bool broken() const { return broken_ || failed_; }

  // true if the connection is fit for a new request: not broken, nothing unread, and
  // the peer has not closed it (checked without blocking). A pooled connection whose
  // server restarted fails this check instead of failing the next request.
  bool reusable();

  // reusable() without looking at the socket (no system call): not broken, retired or
  // mid-request, and no unread reply bytes buffered. What a pool checks when a
  // connection comes back; reusable() is checked again when it is taken.
  bool in_step() const;

  // The caller gives up on replies still due (their deadline passed): the connection
  // is broken, so a pool closes it instead of letting a late reply answer the next
  // request.
  void abandon() { broken_ = true; }

  // The server no longer takes this session as authenticated (it answered NOAUTH: the
  // user was removed, say): replies still due are read as usual, but the connection is
  // not reused, so the next request goes on a new one, which authenticates again.
  // Replies read here retire it by themselves; a caller that finds NOAUTH nested in a
  // reply says so.
  void retire() { retired_ = true; }

  // The socket, for callers that wait on several connections at once (poll(2) for
  // POLLIN, then poll_reply with a deadline of now). Check has_buffered() first: with
  // TLS, a reply can already be held inside the connection while the socket is quiet.
  int fd() const;

  // true if bytes already received wait inside the connection's transport (decrypted
  // TLS records) where poll(2) on fd() cannot see them: poll_reply, not a poll, comes
  // next. poll_reply(now) returning nullopt leaves this false.
  bool has_buffered() const;

  // true for a TLS connection.
  bool secure() const;

  // "host:port", for messages.
  const std::string& endpoint() const { return endpoint_; }

 private:
  Connection(redisContext* context, std::string endpoint);
  // Marks the connection failed and throws the Error for `failure`.
  [[noreturn]] void fail(Failure failure, const std::string& detail);
  // Reads what the transport has into hiredis' reader. false: nothing now, `want`
  // says what to wait for (POLLIN or POLLOUT). Throws (marking the connection failed)
  // when the peer closed it or the read failed.
  bool read_some(short& want);
  // After a TLS 1.3 handshake in which the server asked for our certificate: waits for
  // its verdict by `deadline`. Throws Error(permission_denied) if it refused.
  void confirm_certificate(const core::TlsOptions& tls, Clock::time_point deadline);

  redisContext* context_;
  std::unique_ptr<Transport> transport_;  // over context_->fd
  std::string endpoint_;
  bool received_ = false;  // any byte from the server yet (for messages)
  std::string out_;        // encoded requests not yet written
  bool broken_ = false;    // half-closed: no new requests
  bool failed_ = false;    // a transport failure: nothing works any more
  bool retired_ = false;   // answered NOAUTH: not reused (retire())
};

}  // namespace warden::engines::resp_client
