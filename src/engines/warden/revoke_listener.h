// engines/warden/revoke_listener.h — lock caching's revoke channel to wardend: one
// connection per engine in REVOKES mode (docs/protocol.md), read by a thread of its own.
//
// An ACQUIRE that asks to be cached names the listener's id (CACHE id); wardend then
// pushes `REVOKE key token` down this connection when another client asks for the lock.
// The thread hands each push to the engine's revoke sink.
//
// The listener PINGs a quiet connection every second: a PING unanswered within
// op_timeout means the connection was dropped silently, and counts as broken.
//
// When the connection breaks, pushes may have been lost: the listener reports a revoke
// of everything at once, and connects again (by the retry policy's back-off). A grant is
// cacheable only if the listener its ACQUIRE named was still the one up when the reply
// came (a Ticket still current()): a grant named to a broken listener would never hear
// its revoke.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include "core/engine.h"
#include "engines/resp_client/connector.h"
#include "warden/options.h"

namespace warden::engines::wardend {

class RevokeListener {
 public:
  using OnRevoke = std::function<void(const core::Revoke&)>;

  RevokeListener(std::shared_ptr<resp_client::Connector> connector,
                 std::chrono::milliseconds op_timeout, RetryPolicy retry, OnRevoke on_revoke);
  // Stops the thread and closes the connection.
  ~RevokeListener();
  RevokeListener(const RevokeListener&) = delete;
  RevokeListener& operator=(const RevokeListener&) = delete;

  struct Ticket {
    std::uint64_t id = 0;          // the server's listener id, for ACQUIRE … CACHE id
    std::uint64_t generation = 0;  // which connection of this listener gave it
  };
  // The listener's id while it is up. The first call waits (up to op_timeout) for the
  // first connection; later calls never wait: nullopt while it reconnects.
  std::optional<Ticket> ticket();
  // true if the connection that gave `ticket` has not broken since.
  bool current(const Ticket& ticket) const;

 private:
  void run(std::stop_token stop);
  // Connects and sends REVOKES; the listener id. Throws Error.
  std::uint64_t listen(resp_client::Connection& conn);
  // Hands every push to deliver() until `stop`; throws Error when the connection broke
  // or went silent (a PING unanswered within op_timeout).
  void listen_until_broken(resp_client::Connection& conn, int wake_fd, const std::stop_token& stop);
  void deliver(const resp_client::Reply& push);

  const std::shared_ptr<resp_client::Connector> connector_;
  const std::chrono::milliseconds op_timeout_;
  const RetryPolicy retry_;
  const OnRevoke on_revoke_;

  mutable std::mutex mu_;
  std::condition_variable first_try_;
  bool tried_ = false;            // guarded by mu_: the first connection attempt ended
  std::optional<Ticket> up_;      // guarded by mu_
  std::uint64_t generation_ = 0;  // guarded by mu_
  std::jthread thread_;           // last: it uses everything above
};

}  // namespace warden::engines::wardend
