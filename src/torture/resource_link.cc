#include "torture/resource_link.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace warden::torture {

ResourceLink::ResourceLink(const std::string& socket_path) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    throw std::runtime_error("socket path too long: " + socket_path);
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error("cannot reach the resource at " + socket_path + ": " + why);
  }
}

ResourceLink::~ResourceLink() { ::close(fd_); }

std::string ResourceLink::ask(const std::string& line) {
  const std::string out = line + "\n";
  if (::send(fd_, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
    throw std::runtime_error("the resource went away");
  }
  while (true) {
    const auto newline = in_.find('\n');
    if (newline != std::string::npos) {
      std::string reply = in_.substr(0, newline);
      in_.erase(0, newline + 1);
      return reply;
    }
    char buffer[256];
    const ssize_t n = ::read(fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the resource went away");
    in_.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace warden::torture
