// core/tls_options.h — what an engine URI says about TLS, read the same way for every
// engine that speaks it (warden://, redis://, redlock://, etcd://).
//
//   SCHEME://…?tls=1[&ca=FILE][&cert=FILE&key=FILE][&insecure=1]
//   wardens://… = warden://…?tls=1, rediss://… = redis://…?tls=1, etcds://… = etcd://…?tls=1
//
//   tls=1       speak TLS (1.2 or later); tls=0 (the default) plain TCP
//   ca=FILE     PEM bundle of the CAs that may sign the server's certificate; without
//               it, the system's trust store
//   cert, key   PEM client certificate and its private key, for servers that ask for one
//               (mutual TLS); given together or not at all
//   insecure=1  skip checking the server's certificate and host name. For tests only:
//               anyone on the path can then read and forge every request, and the
//               engine says so on stderr when it connects
//
// The server's certificate is checked by default, including that it names the host the
// URI connects to (a DNS name or an IP address).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/uri.h"

namespace warden::core {

struct TlsOptions {
  bool enabled = false;
  std::optional<std::string> ca_file;
  std::optional<std::string> cert_file;
  std::optional<std::string> key_file;
  bool insecure = false;
};

// true for the query keys TlsOptions reads (tls, ca, cert, key, insecure), which an
// engine's own parser then skips.
bool is_tls_parameter(std::string_view key);

// The TLS options of `uri`. `engine` names the scheme in messages ("redis"). Throws
// Error(invalid_argument) for a bad value, ca/cert/key/insecure without tls=1, or a
// cert without its key (or the reverse). Files are not opened here: the engine loads
// them when it connects.
TlsOptions parse_tls_options(const Uri& uri, std::string_view engine);

// Rewrites a TLS alias scheme to its engine: "wardens" -> "warden", "rediss" ->
// "redis", "etcds" -> "etcd", adding tls=1 (Error(invalid_argument) if the URI also says
// tls=0). Other schemes are left alone.
void resolve_tls_scheme(Uri& uri);

}  // namespace warden::core
