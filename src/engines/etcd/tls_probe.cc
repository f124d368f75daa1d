#include "engines/etcd/tls_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>

namespace warden::engines::etcd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The longest wait for an alert after our side of the handshake: a member that judges
// our certificate answers at once; one that is content says nothing at all.
constexpr milliseconds kAlertWait{1'000};

// Alerts (RFC 8446 §6.2) with which a server turns down the client's certificate.
bool is_certificate_alert(int alert) {
  switch (alert) {
    case 40:   // handshake_failure
    case 42:   // bad_certificate
    case 43:   // unsupported_certificate
    case 44:   // certificate_revoked
    case 45:   // certificate_expired
    case 46:   // certificate_unknown
    case 48:   // unknown_ca
    case 49:   // access_denied
    case 116:  // certificate_required
      return true;
    default:
      return false;
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// OpenSSL writes with write(2): a member that closed the connection would raise
// SIGPIPE, whose default kills the process. The probe's thread blocks it while it runs
// and takes away a SIGPIPE it caused, leaving one that was pending before alone.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    if (!was_pending_) {
      const timespec now{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &now) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

struct SslFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

bool split(const std::string& endpoint, std::string& host, std::string& port) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  host = endpoint.substr(0, colon);
  port = endpoint.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return true;
}

// A TCP connection to host:port within `deadline`, blocking with socket timeouts at
// the deadline; -1 if there is none.
int connect_by(const std::string& host, const std::string& port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, &freeaddrinfo);
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Fd sock{::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol)};
    if (sock.fd < 0) continue;
    if (::connect(sock.fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) continue;
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      pollfd p{sock.fd, POLLOUT, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) continue;
      int error = 0;
      socklen_t size = sizeof error;
      if (::getsockopt(sock.fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) continue;
    }
    ::fcntl(sock.fd, F_SETFL, ::fcntl(sock.fd, F_GETFL) & ~O_NONBLOCK);
    const int fd = sock.fd;
    sock.fd = -1;
    return fd;
  }
  return -1;
}

void set_timeout(int fd, milliseconds timeout) {
  timeout = std::max(timeout, milliseconds(1));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

std::string reason_text(unsigned long error) {
  std::array<char, 256> text{};
  ERR_error_string_n(error, text.data(), text.size());
  return text.data();
}

// What a failed SSL_connect or SSL_read (`result`, with errno `saved_errno` right
// after it) says; `handshaken` when the handshake had completed.
TlsVerdict judge(SSL* ssl, int result, int saved_errno, bool handshaken) {
  const int kind = SSL_get_error(ssl, result);
  const unsigned long error = ERR_peek_last_error();
  TlsVerdict verdict;
  if (kind == SSL_ERROR_SSL && ERR_GET_LIB(error) == ERR_LIB_SSL) {
    const int reason = ERR_GET_REASON(error);
    verdict.detail = reason_text(error);
    if (reason >= SSL_AD_REASON_OFFSET && is_certificate_alert(reason - SSL_AD_REASON_OFFSET)) {
      verdict.kind = TlsVerdict::refused_our_certificate;
    } else if (!handshaken && (reason == SSL_R_WRONG_VERSION_NUMBER ||
                               reason == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
                               reason == SSL_R_PACKET_LENGTH_TOO_LONG)) {
      verdict.kind = TlsVerdict::not_tls;
    }
  } else if (!handshaken && (kind == SSL_ERROR_ZERO_RETURN ||
                             (kind == SSL_ERROR_SYSCALL && saved_errno != EAGAIN &&
                              saved_errno != EWOULDBLOCK && saved_errno != EINTR))) {
    // Closed or reset before a single TLS record came back.
    verdict.kind = TlsVerdict::not_tls;
    verdict.detail = "the connection ended during the handshake";
  }
  return verdict;
}

}  // namespace

TlsVerdict probe_tls(const std::string& endpoint, const core::TlsOptions& tls,
                     milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string host;
  std::string port;
  if (!split(endpoint, host, port)) return {};

  ERR_clear_error();
  std::unique_ptr<SSL_CTX, SslFree> ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return {};
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // The member's certificate is gRPC's to judge; here only the member's judgement of ours
  // is wanted.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  if (tls.cert_file && tls.key_file &&
      (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file->c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file->c_str(), SSL_FILETYPE_PEM) != 1)) {
    ERR_clear_error();
    return {};
  }

  Fd sock{connect_by(host, port, deadline)};
  if (sock.fd < 0) return {};
  set_timeout(sock.fd, std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(ctx.get()));
  if (!ssl || SSL_set_fd(ssl.get(), sock.fd) != 1) return {};
  in6_addr ignored{};
  if (inet_pton(AF_INET, host.c_str(), &ignored) != 1 &&
      inet_pton(AF_INET6, host.c_str(), &ignored) != 1) {
    // SSL_set_tlsext_host_name, without the macro's C cast.
    SSL_ctrl(ssl.get(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(host.c_str()));
  }

  const SigpipeBlocked no_sigpipe;
  TlsVerdict verdict;
  errno = 0;
  const int connected = SSL_connect(ssl.get());
  if (connected != 1) {
    verdict = judge(ssl.get(), connected, errno, false);
  } else {
    // TLS 1.3: the member checks our certificate after our side is done; its alert is
    // the first thing to read.
    set_timeout(
        sock.fd,
        std::min(kAlertWait, std::chrono::duration_cast<milliseconds>(deadline - Clock::now())));
    char byte = 0;
    errno = 0;
    const int read = SSL_read(ssl.get(), &byte, 1);
    if (read <= 0) verdict = judge(ssl.get(), read, errno, true);
  }
  ERR_clear_error();
  return verdict;
}

}  // namespace warden::engines::etcd
