#include "engines/resp_client/transport.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace warden::engines::resp_client {
namespace {

IoResult failure(const char* detail) {
  IoResult result;
  result.status = IoResult::failed;
  result.detail = detail;
  return result;
}

// The benchmarked path: one system call per read or write, no copies of its own.
class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(int fd) : fd_(fd) {}

  IoResult read(char* buf, std::size_t len) override {
    while (true) {
      const ssize_t n = ::recv(fd_, buf, len, 0);
      if (n > 0) return IoResult{IoResult::ok, static_cast<std::size_t>(n)};
      if (n == 0) return IoResult{IoResult::closed};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult{IoResult::want_read};
      return failure(std::strerror(errno));
    }
  }

  IoResult write(const char* data, std::size_t len) override {
    while (true) {
      // MSG_NOSIGNAL: a peer that went away is an error, never a SIGPIPE.
      const ssize_t n = ::send(fd_, data, len, MSG_NOSIGNAL);
      if (n > 0) return IoResult{IoResult::ok, static_cast<std::size_t>(n)};
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return IoResult{IoResult::want_write};
      return failure(n < 0 ? std::strerror(errno) : "send() wrote nothing");
    }
  }

  bool has_buffered() const override { return false; }
  void shutdown_write() override { ::shutdown(fd_, SHUT_WR); }
  bool secure() const override { return false; }

 private:
  const int fd_;
};

}  // namespace

std::unique_ptr<Transport> plain_transport(int fd) { return std::make_unique<PlainTransport>(fd); }

}  // namespace warden::engines::resp_client
