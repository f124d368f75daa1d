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
    // A server that is down or suspect fails its leg at once (Connector::suspect).
    leg.pool->connector().throw_if_backing_off();
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

void fan_out(std::span<Leg> legs, Clock::time_point deadline, const Enough& enough) {
  const auto start = Clock::now();
  std::vector<std::optional<Pool::Handle>> open(legs.size());
  for (std::size_t i = 0; i < legs.size(); ++i) {
    Leg& leg = legs[i];
    leg.replies.clear();
    leg.error.reset();
    if (!leg.commands.empty()) open[i] = send(leg, deadline);
  }

  std::optional<Clock::time_point> grace_ends;  // once `enough` said the round is decided
  std::vector<pollfd> fds;
  std::vector<std::size_t> waiting;
  while (true) {
    fds.clear();
    waiting.clear();
    bool buffered = false;
    for (std::size_t i = 0; i < legs.size(); ++i) {
      if (!open[i]) continue;
      try {
        if (read_arrived(legs[i], **open[i])) {
          legs[i].pool->connector().answered();
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
      // read_arrived drained it; should a TLS connection still hold decrypted bytes
      // that poll() cannot see, do not sleep on them.
      if ((*open[i])->has_buffered()) buffered = true;
    }
    if (waiting.empty()) return;

    const auto now = Clock::now();
    if (!grace_ends && enough && enough(std::span<const Leg>(legs.data(), legs.size()))) {
      // As long as the round took so far, and at least a quarter of its bound: a server
      // that stays silent that long is frozen or overloaded, not merely the last one.
      grace_ends = std::min(deadline, now + std::max({Clock::duration(std::chrono::milliseconds(1)),
                                                      now - start, (deadline - start) / 4}));
    }
    const bool decided = grace_ends && now >= *grace_ends;
    if (decided || now >= deadline) {
      for (std::size_t i : waiting) {
        (*open[i])->abandon();
        const std::string& endpoint = (*open[i])->endpoint();
        legs[i].error = Error(Errc::deadline_exceeded,
                              decided ? "not waited for: the round was decided without " + endpoint
                                      : "no reply from " + endpoint + " in time");
        legs[i].pool->connector().suspect(*legs[i].error);
        open[i].reset();
      }
      return;
    }
    // Readable, closed or failed connections all wake the poll; read_arrived then
    // reads, or reports the failure.
    const auto until = grace_ends ? std::min(deadline, *grace_ends) : deadline;
    if (::poll(fds.data(), fds.size(), buffered ? 0 : poll_timeout_ms(until)) < 0 &&
        errno != EINTR) {
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
