// support/tls_wardend.h — wardend with a TLS listener beside its plain one, presenting
// the test server certificate (support/test_certs.h), optionally asking clients for
// theirs (mutual TLS, signed by the test CA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/server_process.h"

namespace warden::testing {

// wardend's TLS options for the test certificates: --tls-listen 127.0.0.1:0,
// --tls-cert/--tls-key the server pair, and with `mutual` --tls-ca the test CA; then `more`.
std::vector<std::string> wardend_tls_args(bool mutual, std::vector<std::string> more = {});

// The TLS port `process` printed at start ("wardend TLS listening on HOST:PORT ...").
// Throws std::runtime_error with the log if there is none within 10 s.
std::uint16_t wardend_tls_port(ServerProcess& process);

// wardend with a plain listener (server.port()) and a TLS one (tls_port).
struct TlsWardend {
  explicit TlsWardend(bool mutual, std::vector<std::string> more = {});

  // "wardens://127.0.0.1:PORT?ca=<test CA>", with the test client certificate when
  // `client_cert` (mutual TLS needs it), then `extra` ("&pool=2") appended.
  std::string uri(bool client_cert, const std::string& extra = "") const;
  std::string log() { return server.process().log_text(); }

  Wardend server;
  std::uint16_t tls_port;
};

}  // namespace warden::testing
