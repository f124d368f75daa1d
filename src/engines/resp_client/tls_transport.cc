#include "engines/resp_client/tls_transport.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

#include "engines/resp_client/wait.h"

namespace warden::engines::resp_client {
namespace {

// ---- A BIO over the socket that sends with MSG_NOSIGNAL --------------------------------
// OpenSSL's socket BIO write()s, which raises SIGPIPE on a closed peer; a library must
// not, so the socket is reached through this BIO instead.

int fd_of(BIO* bio) { return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(bio))); }

int bio_write(BIO* bio, const char* data, int len) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = ::send(fd_of(bio), data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    return -1;
  }
}

int bio_read(BIO* bio, char* buf, int len) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = ::recv(fd_of(bio), buf, static_cast<std::size_t>(len), 0);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    return -1;
  }
}

long bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

const BIO_METHOD* socket_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "warden socket");
    if (m != nullptr) {
      BIO_meth_set_write(m, bio_write);
      BIO_meth_set_read(m, bio_read);
      BIO_meth_set_ctrl(m, bio_ctrl);
    }
    return m;
  }();
  return method;
}

// ---- Reading OpenSSL's errors -------------------------------------------------------------

// OpenSSL's reasons on this thread's queue, oldest first; clears the queue.
std::string openssl_errors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(code);
    if (!text.empty()) text += "; ";
    text += reason != nullptr ? reason : "error " + std::to_string(ERR_GET_REASON(code));
  }
  return text.empty() ? "unknown error" : text;
}

int first_ssl_reason() {
  const unsigned long code = ERR_peek_error();
  return ERR_GET_LIB(code) == ERR_LIB_SSL ? ERR_GET_REASON(code) : 0;
}

// Alerts a server sends when it does not accept our certificate (or our lack of one).
bool is_client_certificate_alert(int reason) {
  switch (reason) {
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return true;
    default:
      return false;
  }
}

// What a peer that is not a TLS server makes OpenSSL say.
bool is_not_tls(int reason) {
  switch (reason) {
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
    case SSL_R_UNEXPECTED_MESSAGE:
    case SSL_R_UNEXPECTED_RECORD:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
      return true;
    default:
      return false;
  }
}

bool is_ip_literal(const std::string& host) {
  unsigned char addr[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), addr) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

struct SslDeleter {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslDeleter>;

class TlsTransport final : public Transport {
 public:
  TlsTransport(SslPtr ssl, std::shared_ptr<const TlsContext> context, std::string endpoint)
      : ssl_(std::move(ssl)), context_(std::move(context)), endpoint_(std::move(endpoint)) {
    SSL_set_cert_cb(ssl_.get(), &TlsTransport::on_certificate_request, this);
  }

  ~TlsTransport() override {
    // close_notify, so the server sees a clean end; never after a fatal error.
    if (connected_ && !fatal_) {
      ERR_clear_error();
      SSL_shutdown(ssl_.get());
      ERR_clear_error();
    }
  }

  // See tls_handshake(); true once connected.
  void handshake(int fd, Clock::time_point deadline) {
    while (true) {
      ERR_clear_error();
      const int r = SSL_connect(ssl_.get());
      if (r == 1) break;
      const int err = SSL_get_error(ssl_.get(), r);
      const int saved_errno = errno;
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        const short events = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        if (wait_for(fd, events, deadline) == Ready::timeout) {
          fatal_ = true;
          throw Error(Errc::unavailable,
                      "the server at " + endpoint_ +
                          " did not complete the TLS handshake in time; it may not speak TLS "
                          "(a plain port?)");
        }
        continue;
      }
      fatal_ = true;
      throw handshake_error(err, saved_errno);
    }
    connected_ = true;
  }

  bool needs_round_trip() const {
    return certificate_requested_ && SSL_version(ssl_.get()) >= TLS1_3_VERSION;
  }

  IoResult read(char* buf, std::size_t len) override {
    ERR_clear_error();
    const int n = SSL_read(ssl_.get(), buf, static_cast<int>(std::min<std::size_t>(len, INT_MAX)));
    if (n > 0) return IoResult{IoResult::ok, static_cast<std::size_t>(n)};
    return failure(SSL_get_error(ssl_.get(), n), errno);
  }

  IoResult write(const char* data, std::size_t len) override {
    ERR_clear_error();
    const int n =
        SSL_write(ssl_.get(), data, static_cast<int>(std::min<std::size_t>(len, INT_MAX)));
    if (n > 0) return IoResult{IoResult::ok, static_cast<std::size_t>(n)};
    return failure(SSL_get_error(ssl_.get(), n), errno);
  }

  // Decrypted application bytes of the record last read. (Not SSL_has_pending: it also
  // counts a record that has only partly arrived, which no read can return yet.)
  bool has_buffered() const override { return SSL_pending(ssl_.get()) > 0; }

  void shutdown_write() override {
    if (connected_ && !fatal_) {
      ERR_clear_error();
      SSL_shutdown(ssl_.get());  // close_notify: a clean end of our direction
      ERR_clear_error();
    }
    ::shutdown(SSL_get_fd(ssl_.get()), SHUT_WR);
  }

  bool secure() const override { return true; }

 private:
  static int on_certificate_request(SSL*, void* self) {
    static_cast<TlsTransport*>(self)->certificate_requested_ = true;
    return 1;  // go on with the certificate the context holds, if any
  }

  // The refusal of our certificate, or nullopt if `reason` is not one.
  std::optional<std::string> refused_certificate(int reason) const {
    // TLS 1.2 servers answer a missing certificate with a plain handshake_failure.
    if (!is_client_certificate_alert(reason) &&
        !(reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE && certificate_requested_)) {
      return std::nullopt;
    }
    const auto& cert = context_->options().cert_file;
    const std::string alert = openssl_errors();
    if (!cert) {
      return "the server at " + endpoint_ +
             " requires a client certificate (give cert=FILE&key=FILE): " + alert;
    }
    return "the server at " + endpoint_ + " refused our client certificate '" + *cert +
           "': " + alert;
  }

  Error handshake_error(int err, int saved_errno) const {
    const int reason = err == SSL_ERROR_SSL ? first_ssl_reason() : 0;
    if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
      ERR_clear_error();
      const long result = SSL_get_verify_result(ssl_.get());
      std::string why = X509_verify_cert_error_string(result);
      if (result == X509_V_ERR_HOSTNAME_MISMATCH || result == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        why += " (the certificate does not name the host connected to)";
      } else if (result == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                 result == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                 result == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT) {
        const auto& ca = context_->options().ca_file;
        why += ca ? " (not signed by a CA in '" + *ca + "')"
                  : std::string(" (not signed by a CA the system trusts; give ca=FILE)");
      }
      return Error(Errc::permission_denied,
                   "the TLS certificate of " + endpoint_ + " was rejected: " + why);
    }
    if (auto refused = refused_certificate(reason)) {
      return Error(Errc::permission_denied, *refused);
    }
    if (is_not_tls(reason) || err == SSL_ERROR_ZERO_RETURN ||
        (err == SSL_ERROR_SYSCALL && saved_errno == 0)) {
      const std::string detail = reason != 0 ? openssl_errors() : "it closed the connection";
      return Error(Errc::unavailable,
                   "the server at " + endpoint_ + " does not speak TLS (" + detail + ")");
    }
    if (err == SSL_ERROR_SYSCALL) {
      ERR_clear_error();
      return Error(Errc::unavailable, "TLS handshake with " + endpoint_ +
                                          " failed: " + std::strerror(saved_errno) +
                                          " (does the server speak TLS?)");
    }
    return Error(Errc::unavailable,
                 "TLS handshake with " + endpoint_ + " failed: " + openssl_errors());
  }

  IoResult failure(int err, int saved_errno) {
    switch (err) {
      case SSL_ERROR_WANT_READ:
        return IoResult{IoResult::want_read};
      case SSL_ERROR_WANT_WRITE:
        return IoResult{IoResult::want_write};
      case SSL_ERROR_ZERO_RETURN:  // close_notify
        return IoResult{IoResult::closed};
      default:
        break;
    }
    fatal_ = true;
    IoResult result{IoResult::failed};
    if (err == SSL_ERROR_SYSCALL) {
      ERR_clear_error();
      if (saved_errno == 0) return IoResult{IoResult::closed};  // EOF, no close_notify
      result.detail = std::strerror(saved_errno);
      return result;
    }
    const int reason = first_ssl_reason();
    if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
      ERR_clear_error();
      return IoResult{IoResult::closed};
    }
    if (auto refused = refused_certificate(reason)) {
      result.code = Errc::permission_denied;
      result.detail = *refused;
      return result;
    }
    result.detail = "TLS: " + openssl_errors();
    return result;
  }

  const SslPtr ssl_;
  const std::shared_ptr<const TlsContext> context_;  // for its options, in messages
  const std::string endpoint_;
  bool connected_ = false;
  bool fatal_ = false;  // after a fatal error, OpenSSL forbids SSL_shutdown
  bool certificate_requested_ = false;
};

}  // namespace

TlsSession tls_handshake(std::shared_ptr<const TlsContext> context, int fd, const std::string& host,
                         const std::string& endpoint, Clock::time_point deadline) {
  ERR_clear_error();
  SslPtr ssl(SSL_new(context->native()));
  const BIO_METHOD* method = socket_method();
  BIO* bio = method != nullptr ? BIO_new(method) : nullptr;
  if (!ssl || bio == nullptr) {
    BIO_free(bio);
    throw Error(Errc::internal,
                "TLS: cannot set up a connection to " + endpoint + ": " + openssl_errors());
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl.get(), bio, bio);  // the SSL owns the BIO from here on

  const bool ip = is_ip_literal(host);
  // SNI carries DNS names only (RFC 6066).
  // (SSL_set_tlsext_host_name, without the macro's C cast.)
  if (!ip) {
    SSL_ctrl(ssl.get(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(host.c_str()));
  }
  if (!context->options().insecure) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                      : SSL_set1_host(ssl.get(), host.c_str());
    if (ok != 1) {
      throw Error(Errc::invalid_argument,
                  "TLS: cannot check the certificate of " + endpoint + " against '" + host + "'");
    }
  }
  auto transport = std::make_unique<TlsTransport>(std::move(ssl), std::move(context), endpoint);
  transport->handshake(fd, deadline);
  TlsSession session;
  session.needs_round_trip = transport->needs_round_trip();
  session.transport = std::move(transport);
  return session;
}

}  // namespace warden::engines::resp_client
