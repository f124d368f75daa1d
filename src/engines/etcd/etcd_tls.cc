#include "engines/etcd/etcd_tls.h"

#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "engines/etcd/tls_probe.h"

namespace warden::engines::etcd {
namespace {

// The whole of the file `path`, given as `key`= in the URI, which must hold a PEM block.
std::string read_pem(const std::string& path, const char* key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(Errc::permission_denied, std::string("etcd:// URI: cannot read the ") + key +
                                             "= file '" + path + "': " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    throw Error(Errc::permission_denied,
                std::string("etcd:// URI: cannot read the ") + key + "= file '" + path + "'");
  }
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    throw Error(Errc::invalid_argument, std::string("etcd:// URI: the ") + key + "= file '" + path +
                                            "' holds no PEM block");
  }
  return text.str();
}

bool says(const std::string& message, const char* text) {
  return message.find(text) != std::string::npos;
}

}  // namespace

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const core::TlsOptions& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (tls.ca_file) ssl.pem_root_certs = read_pem(*tls.ca_file, "ca");
  if (tls.cert_file) ssl.pem_cert_chain = read_pem(*tls.cert_file, "cert");
  if (tls.key_file) ssl.pem_private_key = read_pem(*tls.key_file, "key");
  return grpc::SslCredentials(ssl);
}

std::optional<TlsFailure> tls_failure(const grpc::Status& status, bool tls) {
  if (!tls || status.error_code() != grpc::StatusCode::UNAVAILABLE) return std::nullopt;
  const std::string& message = status.error_message();
  if (says(message, "certificate verify failed")) {
    return TlsFailure{Errc::permission_denied,
                      "TLS: the member's certificate is not trusted (not signed by the ca= "
                      "CA, or by a system root without ca=; or expired, or not yet valid)"};
  }
  if (says(message, "is not in peer certificate")) {
    return TlsFailure{Errc::permission_denied,
                      "TLS: the member's certificate does not name the host the URI connects "
                      "to"};
  }
  if (says(message, "WRONG_VERSION_NUMBER") || says(message, "wrong version number")) {
    return TlsFailure{Errc::unavailable,
                      "TLS: the member does not answer in TLS on this port (a plain etcd? "
                      "then etcd://, without tls=1)"};
  }
  if (says(message, "andshake")) {
    return TlsFailure{Errc::unavailable, "TLS: the handshake with the member failed"};
  }
  return std::nullopt;
}

std::optional<Error> explain_open_failure(const Error& error,
                                          const std::vector<std::string>& endpoints,
                                          const core::TlsOptions& tls,
                                          std::chrono::milliseconds timeout) {
  if (error.code() != Errc::unavailable) return std::nullopt;
  // what() is "unavailable: MESSAGE"; the new Error puts its own code in front.
  std::string message = error.what();
  const std::string code_prefix = std::string(to_string(error.code())) + ": ";
  if (message.starts_with(code_prefix)) message.erase(0, code_prefix.size());
  // A refused connection or a timeout is a member that is not there; only a connection
  // that was accepted and then ended has something to tell.
  const bool ended = says(message, "Socket closed") || says(message, "Endpoint read failed") ||
                     says(message, "Connection reset") || says(message, "http1.x") ||
                     says(message, "End of TCP stream");
  if (!ended) return std::nullopt;
  if (!tls.enabled) {
    return Error(Errc::unavailable,
                 message +
                     " (the member accepted the connection and closed it: if it serves "
                     "TLS, connect with etcds://, or tls=1)");
  }
  for (const std::string& endpoint : endpoints) {
    const TlsVerdict verdict = probe_tls(endpoint, tls, timeout);
    if (verdict.kind == TlsVerdict::refused_our_certificate) {
      return Error(
          Errc::permission_denied,
          "TLS: etcd member " + endpoint + " refused our client certificate (" +
              (tls.cert_file ? "cert=" + *tls.cert_file + " is not signed by a CA it trusts"
                             : std::string("none was given: add cert= and key=")) +
              "): " + verdict.detail);
    }
    if (verdict.kind == TlsVerdict::not_tls) {
      return Error(Errc::unavailable,
                   "TLS: etcd member " + endpoint +
                       " does not speak TLS on this port (a plain etcd? then etcd://, "
                       "without tls=1): " +
                       verdict.detail);
    }
  }
  return Error(Errc::unavailable,
               message + " (over TLS; a handshake of warden's own did not say why)");
}

}  // namespace warden::engines::etcd
