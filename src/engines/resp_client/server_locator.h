// engines/resp_client/server_locator.h — where the server a ConnectOptions means is now,
// for servers that move: a Redis master behind Sentinel (master_locator.h), a wardend
// cell's leader (engines/warden/cell_locator.h).
//
// open_connection() goes through the locator when ConnectOptions has one; a connection
// whose server turns out not to serve any more (READONLY) is reported with forget(), and
// still_current() tells a pooled connection's user whether to keep it.
#pragma once

#include <memory>
#include <string>

namespace warden::engines::resp_client {

class Connection;
class TlsContext;
struct ConnectOptions;

class ServerLocator {
 public:
  virtual ~ServerLocator() = default;
  // Opens a connection to the server as now found, with `data`'s credentials, TLS and
  // timeout (its host and port are not used), confirmed to serve. Throws Error.
  virtual std::unique_ptr<Connection> connect(const ConnectOptions& data,
                                              const std::shared_ptr<const TlsContext>& tls) = 0;
  // The server at `endpoint` ("host:port") does not serve: the next connect looks again.
  virtual void forget(const std::string& endpoint) = 0;
  // true if `endpoint` is the server as last found (or none is known).
  virtual bool is_current(const std::string& endpoint) = 0;
  // For messages: which servers it looks among.
  virtual const std::string& description() const = 0;
};

}  // namespace warden::engines::resp_client
