#include "engines/resp_client/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

// OpenSSL's reasons for the last failure on this thread, oldest first; clears them.
std::string openssl_errors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    if (!text.empty()) text += "; ";
    text += buf;
  }
  return text.empty() ? "unknown error" : text;
}

[[noreturn]] void refuse(const std::string& what, const std::string& file, const std::string& why) {
  throw Error(Errc::permission_denied, "TLS: cannot use " + what + " '" + file + "': " + why);
}

// A file OpenSSL is about to read must at least open: its own message for a missing
// file is less plain than errno's.
void check_readable(const std::string& what, const std::string& file) {
  std::ifstream in(file);
  if (!in) refuse(what, file, std::strerror(errno));
}

struct FreeCtx {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};

}  // namespace

TlsContext::TlsContext(SSL_CTX* ctx, core::TlsOptions options)
    : ctx_(ctx), options_(std::move(options)) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

std::shared_ptr<const TlsContext> TlsContext::create(const core::TlsOptions& options,
                                                     std::string_view endpoint) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, FreeCtx> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) throw Error(Errc::internal, "TLS: cannot create a context: " + openssl_errors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // Partial writes: flush() keeps its place in its own buffer, as with send().
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

  if (options.ca_file) {
    check_readable("the CA file", *options.ca_file);
    if (SSL_CTX_load_verify_locations(ctx.get(), options.ca_file->c_str(), nullptr) != 1) {
      refuse("the CA file", *options.ca_file, openssl_errors());
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    throw Error(Errc::permission_denied,
                "TLS: cannot load the system's trusted CAs (give ca=FILE): " + openssl_errors());
  }
  if (options.cert_file && options.key_file) {
    check_readable("the client certificate", *options.cert_file);
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), options.cert_file->c_str()) != 1) {
      refuse("the client certificate", *options.cert_file, openssl_errors());
    }
    check_readable("the client key", *options.key_file);
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), options.key_file->c_str(), SSL_FILETYPE_PEM) != 1) {
      // OpenSSL checks the key against the certificate as it loads it.
      const int reason = ERR_GET_REASON(ERR_peek_error());
      if (reason == X509_R_KEY_VALUES_MISMATCH || reason == X509_R_KEY_TYPE_MISMATCH) {
        ERR_clear_error();
        refuse("the client key", *options.key_file,
               "it does not match the certificate '" + *options.cert_file + "'");
      }
      refuse("the client key", *options.key_file, openssl_errors());
    }
    if (SSL_CTX_check_private_key(ctx.get()) != 1) {
      ERR_clear_error();
      refuse("the client key", *options.key_file,
             "it does not match the certificate '" + *options.cert_file + "'");
    }
  }
  SSL_CTX_set_verify(ctx.get(), options.insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
  if (options.insecure) {
    std::fprintf(stderr,
                 "warden: WARNING: insecure=1: the TLS certificate of %.*s is not checked; use "
                 "only in tests\n",
                 static_cast<int>(endpoint.size()), endpoint.data());
  }
  return std::shared_ptr<const TlsContext>(new TlsContext(ctx.release(), options));
}

}  // namespace warden::engines::resp_client
