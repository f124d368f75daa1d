// engines/etcd/tls_probe.h — one TLS handshake of our own with a member, to say why
// gRPC's did not work when gRPC does not.
//
// gRPC 1.51 reports a member that refused our client certificate (none, or one from
// another CA) and a member that does not speak TLS at all the same way: UNAVAILABLE,
// "Endpoint read failed", "Connection reset by peer" or "Socket closed" — the text of a
// member that went away. Under TLS 1.3 the server judges the client certificate after
// the client's side of the handshake is done, so gRPC sees only a closed connection;
// the server's alert ("certificate required", "bad certificate") is in gRPC's log at
// most. probe_tls() shakes hands with OpenSSL directly, with the same CA, certificate
// and key, and reads the answer: the alert, or the end of a connection whose other side
// never answered in TLS.
#pragma once

#include <chrono>
#include <string>

#include "core/tls_options.h"

namespace warden::engines::etcd {

struct TlsVerdict {
  enum Kind {
    unknown,                  // nothing learned: connection refused, timeout, all well
    refused_our_certificate,  // the member sent an alert about our certificate
    not_tls,                  // the member closed or answered without speaking TLS
  };
  Kind kind = unknown;
  std::string detail;  // OpenSSL's reason, for the message
};

// Connects to `endpoint` ("host:port" or "[v6]:port"), shakes hands with `tls`'s
// client certificate (the member's own certificate is not checked here: gRPC says when
// that fails), and waits briefly for a post-handshake alert. Everything it does is
// bounded by `timeout`; it never throws.
TlsVerdict probe_tls(const std::string& endpoint, const core::TlsOptions& tls,
                     std::chrono::milliseconds timeout);

}  // namespace warden::engines::etcd
