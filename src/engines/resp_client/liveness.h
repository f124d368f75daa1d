// Liveness of a connection the server writes to only when it has something to say
// (pushes, answers to waits, published messages). Quiet and dropped silently — a NAT or
// firewall that forgot the connection, a peer whose host vanished — look the same from
// the socket. A PING after `every` of quiet, answered within `timeout`, tells the two
// apart: no PONG in time is a broken connection.
//
// Used by the one thread that reads the connection: before each wait for a reply,
// check(); for each reply, heard().
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engines/resp_client/connection.h"
#include "engines/resp_client/reply.h"
#include "warden/types.h"
#include "warden/error.h"

namespace warden::engines::resp_client {

// The answer to PING outside subscribed mode.
inline bool is_pong(const Reply& reply) {
  return reply.type == Reply::Type::status && reply.text == "PONG";
}

class Liveness {
 public:
  Liveness(Clock::duration every, Clock::duration timeout) : every_(every), timeout_(timeout) {}

  // Throws Error(unavailable) naming `what` when a PING went unanswered past the timeout;
  // appends a PING to `conn` (the caller flushes) when one is due. Returns the time by
  // which to come back here: wait for a reply no longer than that.
  Clock::time_point check(Connection& conn, Clock::time_point now, std::string_view what) {
    if (pong_due_ && now >= *pong_due_) {
      throw Error(Errc::unavailable,
                  std::string(what) + ": no answer to PING within " +
                      std::to_string(
                          std::chrono::duration_cast<std::chrono::milliseconds>(timeout_).count()) +
                      " ms");
    }
    if (!next_ping_) next_ping_ = now + every_;
    if (!pong_due_ && now >= *next_ping_) {
      const std::string_view ping[] = {"PING"};
      conn.append(std::span<const std::string_view>(ping));
      pong_due_ = now + timeout_;
    }
    return pong_due_.value_or(*next_ping_);
  }

  // A reply came: quiet counts from now; a PONG (`pong`) also answers the PING out.
  void heard(Clock::time_point now, bool pong) {
    next_ping_ = now + every_;
    if (pong) pong_due_.reset();
  }

  // A new connection, or none to watch: no PING out, quiet counts from the next check.
  void reset() {
    next_ping_.reset();
    pong_due_.reset();
  }

 private:
  const Clock::duration every_;
  const Clock::duration timeout_;
  std::optional<Clock::time_point> next_ping_;
  std::optional<Clock::time_point> pong_due_;
};

}  // namespace warden::engines::resp_client
