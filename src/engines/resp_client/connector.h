// engines/resp_client/connector.h — the one door through which an engine opens
// connections to its server, with reconnect back-off.
//
// After a failed connect, further attempts within the back-off delay fail at once, so
// a dead server is not hammered by every caller (the watchdog's renewals, every
// acquiring thread); the delay grows with consecutive failures as the RetryPolicy says
// and starts again after a success.
//
// With TLS, the Connector loads the certificates once (TlsContext) and its connections
// share them.
//
// Thread-safe: connects run concurrently; only the back-off state is shared.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "engines/resp_client/backoff.h"
#include "engines/resp_client/connection.h"
#include "engines/resp_client/tls_context.h"
#include "warden/error.h"
#include "warden/options.h"

namespace warden::engines::resp_client {

// A connection to the server `options` name: their host and port, or the master their
// locator finds. Throws what Connection::open / MasterLocator::connect throw.
std::unique_ptr<Connection> open_connection(const ConnectOptions& options,
                                            const std::shared_ptr<const TlsContext>& tls);
// false if `conn` goes to a server that is no longer the one `options` mean (the master
// moved): its user should drop it and open another.
bool still_current(const Connection& conn, const ConnectOptions& options);

class Connector {
 public:
  // With options.tls.enabled, loads the TLS files now (unless `tls` is given: the
  // context another Connector loaded from the same options, as a cluster's nodes share
  // one): throws what TlsContext::create throws (permission_denied naming a file that
  // cannot be used).
  Connector(ConnectOptions options, const RetryPolicy& retry,
            std::shared_ptr<const TlsContext> tls = nullptr);

  // A new connection. Throws what Connection::open throws; within the back-off delay
  // after a failure, throws at once an Error with the last failure's code and message
  // (and how long until the next real attempt).
  std::unique_ptr<Connection> connect();

  // Throws what connect() would throw at once while it is backing off (after a failed
  // connect, or while the server is suspect); returns otherwise.
  void throw_if_backing_off();

  // The server took a request but did not answer in time (frozen, or overloaded):
  // suspect it, so that connect() and throw_if_backing_off() refuse it for a back-off
  // delay that grows while it stays silent, instead of every caller opening yet another
  // connection into a backlog nobody reads. answered() ends the suspicion.
  void suspect(const Error& why);
  void answered();
  // The server behind `conn` said it no longer serves (READONLY: no longer the master):
  // the next connect asks its locator (the sentinels, the cell) again.
  void server_moved(const Connection& conn);

  // "host:port", for messages.
  const std::string& endpoint() const { return endpoint_; }
  const ConnectOptions& options() const { return options_; }
  // The TLS context its connections share; nullptr for plain TCP. For other
  // connections to the same server (a subscriber's), so it is loaded once.
  const std::shared_ptr<const TlsContext>& tls() const { return tls_; }

 private:
  const ConnectOptions options_;
  const std::string endpoint_;
  const std::shared_ptr<const TlsContext> tls_;

  std::mutex mu_;
  Backoff backoff_;                     // guarded by mu_
  Clock::time_point not_before_;        // guarded by mu_; no attempt before this
  Backoff suspect_backoff_;             // guarded by mu_
  Clock::time_point suspect_until_;     // guarded by mu_; refused until this
  Errc last_code_ = Errc::unavailable;  // guarded by mu_
  std::string last_message_;            // guarded by mu_
};

}  // namespace warden::engines::resp_client
