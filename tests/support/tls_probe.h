// support/tls_probe.h — a small blocking OpenSSL client for TLS tests: connect to
// 127.0.0.1:port, handshake (optionally checking the server's certificate and name, and
// presenting a client certificate), send raw bytes, read RESP replies.
//
// Each step that fails records its reason in error() — OpenSSL's words for a handshake
// or record failure ("certificate verify failed", "tlsv13 alert certificate required"),
// "connection closed" when the server closed, "timed out" when it said nothing within
// the timeout — and every later step then fails at once. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "support/test_certs.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace warden::testing {

struct TlsProbeOptions {
  // CA bundle that must have signed the server's certificate; empty: not checked.
  std::filesystem::path ca;
  // The name sent as SNI and, with `ca`, checked against the certificate (a DNS name,
  // or an IP address checked against its IP SANs).
  std::string host = "localhost";
  // A client certificate to present when the server asks for one.
  std::optional<CertPair> client;
  // How long one connect, handshake, send or read may wait.
  std::chrono::milliseconds timeout{std::chrono::seconds(20)};
};

class TlsProbe {
 public:
  // Connects and handshakes; see handshake_ok() and error().
  TlsProbe(std::uint16_t port, const TlsProbeOptions& options);
  ~TlsProbe();
  TlsProbe(const TlsProbe&) = delete;
  TlsProbe& operator=(const TlsProbe&) = delete;

  // true when the handshake completed. Under TLS 1.3 the server checks a client
  // certificate after the client's handshake is done: a refusal shows on the first read.
  bool handshake_ok() const { return handshake_ok_; }
  // Why the last step failed; empty while all went well.
  const std::string& error() const { return error_; }

  // Sends `bytes` as they are. false on failure (see error()).
  bool send(std::string_view bytes);
  // One complete RESP reply, as sent; "" on failure (see error()).
  std::string reply();
  // send() then reply().
  std::string call(std::string_view request);

 private:
  bool fail(const std::string& why);
  std::string openssl_reason(int ret);

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  bool handshake_ok_ = false;
  std::string error_;
  std::string buffer_;  // bytes read beyond the last reply
};

// A RESP request made of `args` ("*N\r\n$len\r\narg\r\n...").
std::string resp_command(std::initializer_list<std::string_view> args);

}  // namespace warden::testing
