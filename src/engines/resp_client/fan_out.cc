#include "engines/resp_client/fan_out.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace warden::engines::resp_client {
namespace {

// Takes a connection for `leg` and writes its commands; nullopt (with leg.error set) if
// that failed.
std::optional<Pool::Handle> send(Leg& leg, Clock::time_point deadline) {
  try {
    auto handle = leg.pool->take(deadline, {});
    if (!handle) {
      leg.error =
          Error(Errc::deadline_exceeded, "no free connection to a server before the deadline");
      return std::nullopt;
    }
    for (const Command& command : leg.commands) (*handle)->append(command);
    (*handle)->flush(deadline);
    return handle;
  } catch (const Error& e) {
    leg.error = e;
    return std::nullopt;
  }
}

// Reads the replies that have arrived on `conn` without waiting; true once `leg` has
// all of them. Throws Error when the connection fails.
bool read_arrived(Leg& leg, Connection& conn) {
  while (leg.replies.size() < leg.commands.size()) {
    auto reply = conn.poll_reply(Clock::time_point::min());
    if (!reply) return false;
    leg.replies.push_back(std::move(*reply));
  }
  return true;
}

int poll_timeout_ms(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<std::int64_t>(ms, INT_MAX));
}

}  // namespace

void fan_out(std::span<Leg> legs, Clock::time_point deadline) {
  std::vector<std::optional<Pool::Handle>> open(legs.size());
  for (std::size_t i = 0; i < legs.size(); ++i) {
    Leg& leg = legs[i];
    leg.replies.clear();
    leg.error.reset();
    if (!leg.commands.empty()) open[i] = send(leg, deadline);
  }

  std::vector<pollfd> fds;
  std::vector<std::size_t> waiting;
  while (true) {
    fds.clear();
    waiting.clear();
    for (std::size_t i = 0; i < legs.size(); ++i) {
      if (!open[i]) continue;
      try {
        if (read_arrived(legs[i], **open[i])) {
          open[i].reset();  // complete: the connection goes back to its pool
          continue;
        }
      } catch (const Error& e) {
        legs[i].error = e;
        open[i].reset();  // broken: the pool closes it
        continue;
      }
      fds.push_back(pollfd{(*open[i])->fd(), POLLIN, 0});
      waiting.push_back(i);
    }
    if (waiting.empty()) return;
    if (Clock::now() >= deadline) {
      for (std::size_t i : waiting) {
        (*open[i])->abandon();
        legs[i].error =
            Error(Errc::deadline_exceeded, "no reply from " + (*open[i])->endpoint() + " in time");
        open[i].reset();
      }
      return;
    }
    // Readable, closed or failed connections all wake the poll; read_arrived then
    // reads, or reports the failure.
    if (::poll(fds.data(), fds.size(), poll_timeout_ms(deadline)) < 0 && errno != EINTR) {
      for (std::size_t i : waiting) {
        (*open[i])->abandon();
        legs[i].error = Error(Errc::internal, std::string("poll failed: ") + std::strerror(errno));
        open[i].reset();
      }
      return;
    }
  }
}

}  // namespace warden::engines::resp_client
