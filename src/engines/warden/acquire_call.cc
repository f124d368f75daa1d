#include "engines/warden/acquire_call.h"

#include <algorithm>

#include "engines/resp_client/errors.h"
#include "engines/resp_client/stop_waker.h"

namespace warden::engines::wardend {
namespace {

using resp_client::Connection;
using Kind = AcquireOutcome::Kind;

// How often a wait looks at its stop token when no eventfd could be made for it.
constexpr auto kStopSlice = std::chrono::milliseconds(50);

Clock::time_point saturating_add(Clock::time_point t, Clock::duration d) {
  return t > Clock::time_point::max() - d ? Clock::time_point::max() : t + d;
}

// The grants a reply to `call` carries: nullopt for nil. Throws for errors and shapes.
std::optional<std::vector<GrantReply>> grants_in(const Reply& reply, const AcquireCall& call) {
  if (call.set_members > 0) return parse_acquire_set(reply, call.set_members, call.context);
  auto grant = parse_acquire(reply, call.context);
  if (!grant) return std::nullopt;
  return std::vector<GrantReply>{std::move(*grant)};
}

AcquireOutcome interpret(const Reply& reply, Clock::time_point sent, const AcquireCall& call) {
  AcquireOutcome out;
  out.sent = sent;
  if (is_starting(reply)) {
    out.kind = Kind::starting;
  } else if (auto grants = grants_in(reply, call)) {
    out.kind = Kind::granted;
    out.grants = std::move(*grants);
  } else {
    out.kind = Kind::not_granted;
  }
  return out;
}

enum class Withdrawal { dropped, granted, unanswered };

// Half-closes and reads the server's last word on the parked request, until `answer_by`.
Withdrawal withdraw(Connection& conn, const AcquireCall& call, Clock::time_point answer_by,
                    std::vector<GrantReply>& grants) {
  conn.shutdown_write();
  std::optional<Reply> reply;
  try {
    reply = conn.poll_reply(answer_by);
  } catch (const Error&) {
    // The server closed (or the connection broke): a closed connection's waiter is
    // dropped from the queue, and a grant would have been written before the close.
    return Withdrawal::dropped;
  }
  if (!reply) return Withdrawal::unanswered;
  if (reply->is_array()) {
    if (auto granted = grants_in(*reply, call)) {
      grants = std::move(*granted);
      return Withdrawal::granted;
    }
  }
  return Withdrawal::dropped;  // nil, as the protocol promises
}

}  // namespace

AcquireOutcome run_acquire(Connection& conn, const AcquireCall& call) {
  conn.append(call.command.command);
  const auto sent = Clock::now();
  conn.flush(sent + call.op_timeout);
  if (!call.command.waits) return interpret(conn.read_reply(sent + call.op_timeout), sent, call);

  // The server answers a wait that ran out at its deadline. Half of op_timeout after it
  // the client withdraws the request itself, and waits for the server's last word until
  // the deadline plus op_timeout: a frozen server holds the call no longer than that.
  // A cancel withdraws at once and waits op_timeout at most.
  const auto give_up = saturating_add(call.deadline, call.op_timeout);
  const auto withdraw_at = saturating_add(call.deadline, call.op_timeout / 2);
  const resp_client::StopWaker waker(call.stop);
  while (true) {
    const auto now = Clock::now();
    if (call.stop.stop_requested() || now >= withdraw_at) {
      AcquireOutcome out;
      out.sent = sent;
      const auto answer_by =
          call.stop.stop_requested() ? std::min(give_up, now + call.op_timeout) : give_up;
      switch (withdraw(conn, call, answer_by, out.grants)) {
        case Withdrawal::granted:
          out.kind = Kind::withdrawn_granted;
          return out;
        case Withdrawal::dropped:
        case Withdrawal::unanswered:
          // Unanswered: the server is frozen or cut off. It drops the waiter when it
          // sees the connection close, and grants nothing to it meanwhile; a grant it
          // made before is on its way in vain and ends by its TTL.
          out.kind = Kind::withdrawn;
          break;
      }
      // A withdrawal past the deadline is the timed-out wait it was.
      if (!call.stop.stop_requested()) out.kind = Kind::not_granted;
      return out;
    }
    const bool woken_by_fd = waker.fd() >= 0 || !call.stop.stop_possible();
    const auto slice_end = woken_by_fd ? withdraw_at : std::min(withdraw_at, now + kStopSlice);
    if (auto reply = conn.poll_reply(slice_end, waker.fd())) {
      return interpret(*reply, sent, call);
    }
  }
}

}  // namespace warden::engines::wardend
