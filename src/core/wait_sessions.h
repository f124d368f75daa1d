// core/wait_sessions.h — for an engine whose asynchronous waits each wait on a server
// session of their own, driven by one thread (postgres://'s and mysql://'s waits): the
// line of waits without a session, the order in which the waits ask, and the thread's one
// poll() over all of their sessions.
#pragma once

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "core/engine.h"

namespace warden::core {

// Waits without a session yet, in the order asked: each begins as soon as a session can
// be had, and none begins before the waits asked earlier.
class SessionLine {
 public:
  void join(std::uint64_t id) { line_.push_back(id); }
  bool empty() const { return line_.empty(); }
  void clear() { line_.clear(); }
  // Begins the waits at the front, in order: `begin(it)` for the iterator of `waits`,
  // false when no session can be had now (the line waits); `stopping()` true once the
  // thread is ending. Waits told meanwhile (cancelled, run out) leave the line here.
  template <class Waits, class Begin, class Stopping>
  void admit(Waits& waits, Begin begin, Stopping stopping) {
    while (!line_.empty()) {
      const auto it = waits.find(line_.front());
      if (it == waits.end()) {
        line_.pop_front();
        continue;
      }
      if (!begin(it)) return;
      line_.pop_front();
      if (stopping()) return;
    }
  }

 private:
  std::deque<std::uint64_t> line_;
};

// Waits log in side by side but ask in the order they began, so that waits asked in turn
// reach the server's queue in that order: a wait asks once it is ready and every wait
// begun before it has asked or ended.
class AskOrder {
 public:
  void began(std::uint64_t id) { unasked_.push_back(id); }
  // Asks each wait at the front that `is_ready`, in order: `ask(it)` for the iterator of
  // `waits` (the thread's map of ids to owned waits), false when the thread is stopping.
  // Stops at the first wait not ready.
  template <class Waits, class IsReady, class Ask>
  void ask_ready(Waits& waits, IsReady is_ready, Ask ask) {
    while (!unasked_.empty()) {
      const auto it = waits.find(unasked_.front());
      if (it != waits.end() && !is_ready(*it->second)) return;
      unasked_.pop_front();
      if (it == waits.end()) continue;  // told already
      if (!ask(it)) return;
    }
  }
  void clear() { unasked_.clear(); }

 private:
  std::deque<std::uint64_t> unasked_;
};

// One poll() of the thread's wake-up descriptor and of every session `watch(wait)` names
// (a pollfd, or nullopt for a wait with nothing to watch), until `until` at the latest.
// The ids of the waits whose sessions are ready, with what poll() saw for each; empty
// after a timeout, a wake-up or EINTR.
template <class Waits, class Watch>
std::vector<std::pair<std::uint64_t, short>> poll_sessions(int wake_fd, const Waits& waits,
                                                           Watch watch, Clock::time_point until) {
  std::vector<pollfd> fds{{wake_fd, POLLIN, 0}};
  std::vector<std::uint64_t> ids;
  for (const auto& [id, wait] : waits) {
    if (const std::optional<pollfd> fd = watch(*wait)) {
      fds.push_back(*fd);
      ids.push_back(id);
    }
  }
  const int ms =
      until == Clock::time_point::max()
          ? -1
          : static_cast<int>(std::clamp<std::int64_t>(
                std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count(), 0,
                60'000));
  std::vector<std::pair<std::uint64_t, short>> ready;
  if (::poll(fds.data(), fds.size(), ms) <= 0) return ready;
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) ready.emplace_back(ids[i - 1], fds[i].revents);
  }
  return ready;
}

}  // namespace warden::core
