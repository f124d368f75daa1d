// engines/resp_client/tls_transport.h — TLS over a connection's non-blocking socket,
// with OpenSSL. The handshake's and every later step's waits are the Connection's
// poll(2) waits with its deadlines (want_read / want_write), never a blocking call.
//
// Failures, each its own Error (what the CLI turns into exit 77 or 69):
//
//   what happened                                    Errc               message says
//   -----------------------------------------------  -----------------  ---------------------
//   the server's certificate was rejected (CA,       permission_denied  why, from OpenSSL's
//     dates, host name)                                                  verifier
//   the server refused our client certificate, or    permission_denied  the alert
//     wanted one we did not give (an alert)
//   the server answered, but not in TLS (wrong       unavailable        "does not speak TLS"
//     version number, EOF during the handshake)
//   no answer to the handshake by the deadline       unavailable        "may not speak TLS"
//     (a plain RESP server waits for a newline that
//     a ClientHello may never contain)
#pragma once

#include <memory>
#include <string>

#include "engines/resp_client/tls_context.h"
#include "engines/resp_client/transport.h"
#include "warden/types.h"

namespace warden::engines::resp_client {

struct TlsSession {
  std::unique_ptr<Transport> transport;
  // TLS 1.3 and the server asked for our certificate: it judges the certificate after
  // the handshake completed on our side, so a refusal arrives as an alert on the first
  // read. The caller makes one round trip before it calls the connection open.
  bool needs_round_trip = false;
};

// Runs the TLS handshake on the connected non-blocking socket `fd` (which the caller
// keeps owning) by `deadline`: SNI and host-name verification for `host` (a DNS name,
// or the IP SAN for an IP literal), as `context` says. `endpoint` ("host:port") is for
// messages. Throws Error as the table above says.
TlsSession tls_handshake(std::shared_ptr<const TlsContext> context, int fd, const std::string& host,
                         const std::string& endpoint, Clock::time_point deadline);

}  // namespace warden::engines::resp_client
