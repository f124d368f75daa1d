#include "cli/events.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "cli/exit_codes.h"
#include "cli/failure.h"

namespace warden::cli {
namespace {

[[noreturn]] void fail_errno(std::string_view what) {
  throw Failure(exit_code::kInternal, what, std::strerror(errno));
}

// Milliseconds until `deadline` for poll(2): -1 for none, rounded up so that a wait
// never returns before its deadline and spins.
int poll_timeout(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return -1;
  auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<std::int64_t>(ms, 24 * 3600 * 1000));
}

}  // namespace

Events::Events() {
  sigset_t watched;
  sigemptyset(&watched);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&watched, s);
  if (int err = pthread_sigmask(SIG_BLOCK, &watched, &original_mask_); err != 0) {
    throw Failure(exit_code::kInternal, "block signals", std::strerror(err));
  }
  signal_fd_ = signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) fail_errno("signalfd");
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    int saved = errno;
    close(signal_fd_);
    errno = saved;
    fail_errno("eventfd");
  }
}

Events::~Events() {
  close(signal_fd_);
  close(wake_fd_);
}

Events::Event Events::wait(Clock::time_point deadline) {
  for (;;) {
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int ready = poll(fds, 2, poll_timeout(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;  // a signal outside the watched set, e.g. SIGWINCH
      fail_errno("poll");
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info;
      ssize_t n = read(signal_fd_, &info, sizeof info);
      if (n == static_cast<ssize_t>(sizeof info)) {
        Event event;
        event.kind = Event::Kind::signal;
        event.signal = static_cast<int>(info.ssi_signo);
        event.sent_by_process = info.ssi_code != SI_KERNEL;
        return event;
      }
      if (n < 0 && errno != EAGAIN) fail_errno("read signalfd");
    }
    if (fds[1].revents & POLLIN) {
      std::uint64_t count = 0;
      ssize_t n = read(wake_fd_, &count, sizeof count);
      if (n == static_cast<ssize_t>(sizeof count)) return Event{Event::Kind::woken};
      if (n < 0 && errno != EAGAIN) fail_errno("read eventfd");
    }
    if (ready == 0 && Clock::now() >= deadline) return Event{Event::Kind::timeout};
  }
}

void Events::wake() noexcept {
  std::uint64_t one = 1;
  // Can only fail if the counter would overflow, i.e. a wake-up is pending anyway.
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

std::string signal_name(int signal) {
  if (const char* abbrev = sigabbrev_np(signal)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signal);
}

}  // namespace warden::cli
