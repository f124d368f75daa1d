#include "engines/resp_client/stop_waker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace warden::engines::resp_client {

void StopWaker::Notify::operator()() const noexcept {
  const std::uint64_t one = 1;
  // A full counter (impossible here) or EINTR would only delay the wake to the next
  // slice; nothing to handle.
  [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
}

StopWaker::StopWaker(const std::stop_token& stop) {
  if (!stop.stop_possible()) return;  // nothing can ever signal it
  fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd_ >= 0) callback_.emplace(stop, Notify{fd_});
}

StopWaker::~StopWaker() {
  callback_.reset();
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace warden::engines::resp_client
