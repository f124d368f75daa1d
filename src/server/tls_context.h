// server/tls_context.h — wardend's TLS settings: the OpenSSL context of the TLS
// listener, and how a failed handshake is described in the log.
//
// The context speaks TLS 1.2 and 1.3 only, holds the server's certificate chain and key
// (checked against each other, and the certificate against the clock, before the server
// starts), and with a CA file asks every client for a certificate that CA signed
// (mutual TLS). No session tickets, no session cache, no renegotiation: see
// make_server_tls_context() for why a lock server needs none of them.
#pragma once

#include <openssl/ssl.h>

#include <asio/ssl/context.hpp>
#include <string>
#include <string_view>
#include <system_error>

#include "server/server.h"

namespace warden::server {

// The context for `options`. Throws warden::Error(invalid_argument) whose message names
// the file and OpenSSL's reason when a file is missing, unreadable or not PEM, when the
// key does not belong to the certificate, or when the certificate is expired or not yet
// valid (no verifying client could connect).
asio::ssl::context make_server_tls_context(const TlsListenOptions& options);

// One line on why the handshake on `ssl` failed with `ec`, in OpenSSL's words, with the
// certificate verification error when that is the cause ("certificate verify failed:
// unable to get local issuer certificate").
std::string describe_handshake_error(std::error_code ec, SSL* ssl);

// true when `bytes` (the first ones a client sent) open a TLS handshake record: a TLS
// client on the plain-text port. No RESP request starts with the byte 0x16.
bool looks_like_tls_hello(std::string_view bytes);

}  // namespace warden::server
