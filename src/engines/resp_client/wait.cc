#include "engines/resp_client/wait.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>

namespace warden::engines::resp_client {

Ready wait_for(int fd, short events, Clock::time_point until, int wake_fd) {
  while (true) {
    int timeout_ms = -1;
    if (until != Clock::time_point::max()) {
      const auto now = Clock::now();
      const auto left = until > now ? until - now : Clock::duration::zero();
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      timeout_ms = static_cast<int>(std::min<std::int64_t>(ms, INT_MAX));
    }
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = ::poll(fds, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Ready::fd;
    }
    if (n == 0) {
      if (Clock::now() >= until) return Ready::timeout;
      continue;
    }
    if (wake_fd >= 0 && fds[1].revents != 0) return Ready::wake;
    return Ready::fd;
  }
}

}  // namespace warden::engines::resp_client
