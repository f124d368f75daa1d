#include "engines/resp_client/stop_waker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace warden::engines::resp_client {
namespace {

// The calling thread's unused eventfds, each unreadable; closed when the thread exits.
class SpareEventFds {
 public:
  SpareEventFds() = default;
  SpareEventFds(const SpareEventFds&) = delete;
  SpareEventFds& operator=(const SpareEventFds&) = delete;
  ~SpareEventFds() {
    for (const int fd : fds_) ::close(fd);
  }

  // -1 if none can be made (descriptor limit).
  int take() {
    if (fds_.empty()) return ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    const int fd = fds_.back();
    fds_.pop_back();
    return fd;
  }

  void give_back(int fd) {
    try {
      fds_.push_back(fd);
    } catch (...) {
      ::close(fd);  // no memory to keep it: closed as before
    }
  }

 private:
  std::vector<int> fds_;
};

SpareEventFds& spare_event_fds() {
  thread_local SpareEventFds spare;
  return spare;
}

}  // namespace

void StopWaker::Notify::operator()() const noexcept {
  const std::uint64_t one = 1;
  // A full counter (impossible here) or EINTR would only delay the wake to the next
  // slice; nothing to handle.
  [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
}

StopWaker::StopWaker(const std::stop_token& stop) : stop_(stop) {
  if (!stop.stop_possible()) return;  // nothing can ever signal it
  fd_ = spare_event_fds().take();
  if (fd_ >= 0) callback_.emplace(stop, Notify{fd_});
}

StopWaker::~StopWaker() {
  callback_.reset();  // from here on nothing writes to fd_
  if (fd_ < 0) return;
  // A stop may have made it readable (not every requested stop did: the callback may
  // have been deregistered before it ran); a read of an unreadable one does nothing.
  if (stop_.stop_requested()) {
    std::uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd_, &count, sizeof count);
  }
  spare_event_fds().give_back(fd_);
}

}  // namespace warden::engines::resp_client
