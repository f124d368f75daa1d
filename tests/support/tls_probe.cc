#include "support/tls_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace warden::testing {
namespace {

bool is_ip_address(const std::string& host) {
  in6_addr addr{};
  return inet_pton(AF_INET, host.c_str(), &addr) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &addr) == 1;
}

// Where the RESP value starting at `pos` ends; npos while it is incomplete.
std::size_t value_end(const std::string& b, std::size_t pos) {
  const std::size_t eol = b.find("\r\n", pos);
  if (pos >= b.size() || eol == std::string::npos) return std::string::npos;
  const char type = b[pos];
  if (type != '$' && type != '*') return eol + 2;  // + - : and anything unexpected
  const long long n = std::stoll(b.substr(pos + 1, eol - pos - 1));
  if (n < 0) return eol + 2;
  if (type == '$') {
    const std::size_t end = eol + 2 + static_cast<std::size_t>(n) + 2;
    return end <= b.size() ? end : std::string::npos;
  }
  std::size_t p = eol + 2;
  for (long long i = 0; i < n && p != std::string::npos; ++i) p = value_end(b, p);
  return p;
}

}  // namespace

std::string resp_command(std::initializer_list<std::string_view> args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out += a;
    out += "\r\n";
  }
  return out;
}

TlsProbe::TlsProbe(std::uint16_t port, const TlsProbeOptions& options) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) {
    fail(std::string("socket: ") + std::strerror(errno));
    return;
  }
  const auto ms = options.timeout.count();
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    fail(std::string("connect: ") + std::strerror(errno));
    return;
  }

  ctx_ = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  // A server that closes without close_notify reads as "connection closed".
  SSL_CTX_set_options(ctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (!options.ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx_, options.ca.c_str(), nullptr) != 1) {
      fail("cannot load CA file " + options.ca.string());
      return;
    }
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  }
  if (options.client) {
    if (SSL_CTX_use_certificate_chain_file(ctx_, options.client->cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_, options.client->key.c_str(), SSL_FILETYPE_PEM) != 1) {
      fail("cannot load client certificate " + options.client->cert.string());
      return;
    }
  }
  ssl_ = SSL_new(ctx_);
  SSL_set_fd(ssl_, fd_);
  if (is_ip_address(options.host)) {
    if (!options.ca.empty())
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), options.host.c_str());
  } else {
    // SSL_set_tlsext_host_name() is a macro with a C cast.
    SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(options.host.c_str()));
    if (!options.ca.empty()) SSL_set1_host(ssl_, options.host.c_str());
  }
  ERR_clear_error();
  const int ret = SSL_connect(ssl_);
  if (ret != 1) {
    fail(openssl_reason(ret));
    return;
  }
  handshake_ok_ = true;
}

TlsProbe::~TlsProbe() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
}

bool TlsProbe::fail(const std::string& why) {
  if (error_.empty()) error_ = why.empty() ? "unknown failure" : why;
  return false;
}

std::string TlsProbe::openssl_reason(int ret) {
  const int saved_errno = errno;
  const int kind = SSL_get_error(ssl_, ret);
  switch (kind) {
    case SSL_ERROR_ZERO_RETURN:
      return "connection closed";
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return "timed out";
    case SSL_ERROR_SYSCALL:
      if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK) return "timed out";
      if (saved_errno == 0 || saved_errno == ECONNRESET || saved_errno == EPIPE) {
        return "connection closed";
      }
      return std::strerror(saved_errno);
    default:
      break;
  }
  std::string text;
  while (const unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    if (!text.empty()) text += "; ";
    text += reason != nullptr ? reason : "error " + std::to_string(e);
  }
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) text += std::string(": ") + X509_verify_cert_error_string(verify);
  return text.empty() ? "TLS error " + std::to_string(kind) : text;
}

bool TlsProbe::send(std::string_view bytes) {
  if (!error_.empty()) return false;
  if (ssl_ == nullptr || !handshake_ok_) return fail("no TLS connection");
  while (!bytes.empty()) {
    ERR_clear_error();
    errno = 0;
    const int n = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
    if (n <= 0) return fail(openssl_reason(n));
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string TlsProbe::reply() {
  if (!error_.empty()) return "";
  if (ssl_ == nullptr || !handshake_ok_) {
    fail("no TLS connection");
    return "";
  }
  for (;;) {
    const std::size_t end = value_end(buffer_, 0);
    if (end != std::string::npos) {
      std::string out = buffer_.substr(0, end);
      buffer_.erase(0, end);
      return out;
    }
    char chunk[4096];
    ERR_clear_error();
    errno = 0;
    const int n = SSL_read(ssl_, chunk, sizeof chunk);
    if (n <= 0) {
      fail(openssl_reason(n));
      return "";
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string TlsProbe::call(std::string_view request) {
  if (!send(request)) return "";
  return reply();
}

}  // namespace warden::testing
