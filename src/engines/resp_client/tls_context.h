// engines/resp_client/tls_context.h — the TLS settings of one server's connections,
// loaded once: an OpenSSL SSL_CTX with the trusted CAs, the client certificate and
// whether to verify. A Connector builds one and its connections share it (SSL_CTX is
// safe to share between threads once configured, which is done in create()).
//
//   what is checked (unless insecure)     how
//   ------------------------------------  ---------------------------------------------
//   the chain, up to a trusted CA         ca= file, or the system's trust store
//   validity dates                        OpenSSL's chain verification
//   the name: the URI's host              SSL_set1_host for a DNS name, the IP SAN for an
//                                         IP literal (tls_transport.cc)
//   protocol                              TLS 1.2 or later
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/tls_options.h"

struct ssl_ctx_st;

namespace warden::engines::resp_client {

class TlsContext {
 public:
  // Loads the files `options` names. `endpoint` ("host:port") is for messages. Throws
  // Error(permission_denied) naming the file when a CA file, certificate or key cannot
  // be read or parsed, or the key does not match the certificate. With
  // options.insecure, writes one warning line to stderr.
  static std::shared_ptr<const TlsContext> create(const core::TlsOptions& options,
                                                  std::string_view endpoint);

  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  ssl_ctx_st* native() const { return ctx_; }
  const core::TlsOptions& options() const { return options_; }

 private:
  TlsContext(ssl_ctx_st* ctx, core::TlsOptions options);

  ssl_ctx_st* const ctx_;
  const core::TlsOptions options_;
};

}  // namespace warden::engines::resp_client
