// engines/warden/acquire_call.h — one ACQUIRE (or ACQUIRESET) on a connection of its own: send it,
// wait for the reply while honouring the caller's stop token, and withdraw a parked
// wait without leaving a trace.
//
// Withdrawing (on stop, or when the server stays silent well past the wait's
// deadline) uses wardend's half-close rule: we shutdown(SHUT_WR) and keep reading. The
// server then cancels the parked waiter and answers nil — or, if the grant won the
// race, the grant reply is already on its way and arrives instead. Either way we learn
// the truth, so the caller can give back a grant nobody will use. The connection is
// half-closed afterwards and must not be reused (Connection::broken()).
#pragma once

#include <chrono>
#include <stop_token>
#include <string>
#include <vector>

#include "engines/resp_client/connection.h"
#include "engines/warden/protocol.h"

namespace warden::engines::wardend {

struct AcquireOutcome {
  enum class Kind {
    granted,      // `grant` holds the grant
    not_granted,  // nil: busy (a try) or the wait's deadline passed
    starting,     // the server is in its restart embargo (STARTING)
    withdrawn,    // stop was requested; the server dropped the waiter
    // The wait was withdrawn (stopped, or the server silent past its deadline) but the
    // grant won the race: nobody will use it, give it back.
    withdrawn_granted,
  };
  Kind kind = Kind::not_granted;
  std::vector<GrantReply> grants;  // granted, withdrawn_granted: one (ACQUIRE) or a set's
  Clock::time_point sent;          // when ACQUIRE started to be written
};

struct AcquireCall {
  AcquireCommand command;
  Clock::time_point deadline;  // the request's deadline (used when command.waits)
  std::stop_token stop;
  std::chrono::milliseconds op_timeout;
  std::string context;          // "ACQUIRE on host:port", for messages
  std::size_t set_members = 0;  // > 0: an ACQUIRESET of this many members
};

// Runs `call` on `conn`. A try waits for its reply up to op_timeout; a wait until its
// reply, `stop`, or deadline + op_timeout (the server answers nil at the deadline; the
// slack covers transit and a busy server). Throws Error for transport failures, for
// error replies other than STARTING, and Error(deadline_exceeded) if the server is
// silent past a wait's deadline + op_timeout and also ignores the withdrawal.
AcquireOutcome run_acquire(resp_client::Connection& conn, const AcquireCall& call);

}  // namespace warden::engines::wardend
