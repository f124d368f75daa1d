#include "server/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "warden/error.h"

namespace warden::server {
namespace {

[[noreturn]] void refuse(const std::string& what) { throw Error(Errc::invalid_argument, what); }

// Opens the file once ourselves, so that "no such file" and "permission denied" are
// said in the system's words rather than as an OpenSSL library error.
void check_readable(const std::string& what, const std::string& path) {
  if (path.empty()) refuse(what + ": no file given");
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) refuse(what + " '" + path + "': " + std::strerror(errno));
  std::fclose(f);
}

// OpenSSL's reason for `ec`, or the system's.
std::string reason(std::error_code ec) {
  return ec ? ec.message() : std::string("unknown OpenSSL error");
}

void check_validity_period(const std::string& cert_file, SSL_CTX* ctx) {
  const X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert == nullptr) refuse("TLS certificate '" + cert_file + "': no certificate in the file");
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    refuse("TLS certificate '" + cert_file +
           "' has expired: no client that verifies it could connect");
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    refuse("TLS certificate '" + cert_file + "' is not valid yet (check the clock)");
  }
}

}  // namespace

asio::ssl::context make_server_tls_context(const TlsListenOptions& options) {
  asio::ssl::context context(asio::ssl::context::tls_server);
  SSL_CTX* ctx = context.native_handle();
  context.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                      asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                      asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // A lock client keeps one connection open for as long as it lives, so resuming
  // sessions saves nothing worth its state. And TLS 1.3 session tickets arrive *after*
  // the handshake: a client that polls its socket to see whether the server closed it
  // would find unread bytes that are no reply. So: no tickets, no session cache. No
  // renegotiation either: nothing in the protocol needs new keys mid-connection, and it
  // is a known way to make a server spend CPU.
  SSL_CTX_set_options(ctx,
                      SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);

  std::error_code ec;
  check_readable("TLS certificate", options.cert_file);
  context.use_certificate_chain_file(options.cert_file, ec);
  if (ec) refuse("TLS certificate '" + options.cert_file + "': " + reason(ec));
  check_readable("TLS key", options.key_file);
  context.use_private_key_file(options.key_file, asio::ssl::context::pem, ec);
  // OpenSSL checks the key against the certificate as it loads it.
  const bool mismatch =
      ec && ec.category() == asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
  if (ec && !mismatch) refuse("TLS key '" + options.key_file + "': " + reason(ec));
  if (mismatch || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    refuse("TLS key '" + options.key_file + "' does not belong to the certificate in '" +
           options.cert_file + "'");
  }
  check_validity_period(options.cert_file, ctx);

  if (!options.ca_file.empty()) {
    check_readable("TLS CA file", options.ca_file);
    context.load_verify_file(options.ca_file, ec);
    if (ec) refuse("TLS CA file '" + options.ca_file + "': " + reason(ec));
    // Tells clients which CAs we accept, so one with several certificates picks the
    // right one (and `openssl s_client` shows it).
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx, names);
    }
    ERR_clear_error();
    // OpenSSL checks the chain, the validity period and that the certificate may be used
    // by a TLS client (extendedKeyUsage clientAuth, when the certificate restricts it).
    context.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    // Under TLS 1.3 the client's certificate is judged after the client finished its
    // side of the handshake, and the client cannot tell "accepted" from "not judged
    // yet" until the server says something. One session ticket is that word: it follows
    // the verdict at once (an alert does for a refusal). Without the session cache and
    // with SSL_OP_NO_TICKET the ticket is stateful and unknown to us, so it can never
    // resume a session that skips the certificate check.
    SSL_CTX_set_num_tickets(ctx, 1);
  } else {
    context.set_verify_mode(asio::ssl::verify_none);
  }
  return context;
}

std::string describe_handshake_error(std::error_code ec, SSL* ssl) {
  std::string text = ec.message();
  if (ec.category() == asio::error::get_ssl_category() && ssl != nullptr) {
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) text += std::string(": ") + X509_verify_cert_error_string(verify);
  }
  return text;
}

bool looks_like_tls_hello(std::string_view bytes) {
  // A TLS record: content type 22 (handshake), then the major version 3.
  return !bytes.empty() && bytes[0] == '\x16' && (bytes.size() < 2 || bytes[1] == '\x03');
}

}  // namespace warden::server
