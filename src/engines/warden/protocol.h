// engines/warden/protocol.h — wardend's commands (docs/protocol.md) as argument lists
// and its replies as values. No I/O, so every shape is unit-tested without a server.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "engines/resp_client/pipeline.h"
#include "engines/resp_client/reply.h"
#include "warden/sequencer.h"

namespace warden::engines::wardend {

using resp_client::Command;
using resp_client::Reply;

// The longest WAIT wardend accepts (ms); a longer wait is sent as FOREVER.
inline constexpr std::int64_t kMaxWaitMs = 7LL * 24 * 3600 * 1000 * 1000;

struct AcquireCommand {
  Command command;
  // true: the server may park the request (WAIT or FOREVER); false: a try.
  bool waits = false;
};

// ACQUIRE key mode ttl [WAIT ms|FOREVER] [UNFAIR] [DELAY ms] [PERMITS k n] [VALUE v] [CACHE id]
// (VALUE: an election's campaign). A deadline at or before
// `now` makes a try; Clock::time_point::max() waits FOREVER; otherwise WAIT is the time
// left, rounded up to whole milliseconds.
// With `revoke_listener`, the grant is asked to be cached: CACHE id (protocol 7).
AcquireCommand acquire_command(const core::AcquireRequest& request, Clock::time_point now,
                               std::optional<std::uint64_t> revoke_listener = std::nullopt);
// ACQUIRESET ttl n key1 mode1 ... [WAIT ms|FOREVER] [UNFAIR] [DELAY ms]: the members in
// the request's order, the wait as for acquire_command. Throws Error(unsupported), before
// any I/O, for a set whose command would be larger than wardend accepts in one request
// (kMaxRequestBytes): the core then takes its members one by one.
AcquireCommand acquire_set_command(const core::AcquireSetRequest& request, Clock::time_point now);
// RENEW key token secret ttl (the secret is grant.owner, from the ACQUIRE reply). Both
// throw Error(not_owner), before any I/O, for an owner that is not a wardend secret (32
// lower-case hex characters): not a grant of a warden:// client.
Command renew_command(const core::GrantRef& grant);
// RELEASE key token secret
Command release_command(const core::GrantRef& grant);
// PROCLAIM key token secret value: an election's leader replaces its value.
Command proclaim_command(const core::GrantRef& grant, std::string_view value);
// CHECK key mode token
Command check_command(const Sequencer& sequencer);
// HELLO
Command hello_command();

// The oldest protocol this client accepts: 2 = grants carry owner secrets.
inline constexpr std::int64_t kProto = 2;
// The largest request wardend reads (server/resp.h), in bytes on the wire.
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;

// The first protocol with ACQUIRESET (multi-locks in one step).
inline constexpr std::int64_t kProtoAcquireSet = 4;
// The first protocol with elections: ACQUIRE ... VALUE, PROCLAIM, INSPECT "values".
inline constexpr std::int64_t kProtoElection = 5;
// The first protocol with WATCH (pushed changes of a key's holders).
inline constexpr std::int64_t kProtoWatch = 6;
// The first protocol with lock caching: REVOKES and ACQUIRE ... CACHE id.
inline constexpr std::int64_t kProtoCache = 7;
// The first protocol with tagged waits: WAITS, ACQUIRE ... TAG t, WITHDRAW t.
inline constexpr std::int64_t kProtoWaits = 8;

// A granted ACQUIRE: [token, waited_us, secret].
struct GrantReply {
  std::uint64_t token = 0;
  // Server time between reading the request and granting it.
  std::chrono::microseconds waited{0};
  // The grant's owner secret (32 lower-case hex characters): RENEW and RELEASE must
  // send it. Kept in GrantRef::owner.
  std::string secret;
};

// true for wardend's restart-embargo error (STARTING): "no grants yet, try later".
bool is_starting(const Reply& reply);

// The reply to ACQUIRE: a grant, or nullopt for nil (not granted). Throws the mapped
// Error for an error reply (callers handle STARTING first) and Error(internal) for any
// other shape. `context` names the command for messages.
std::optional<GrantReply> parse_acquire(const Reply& reply, std::string_view context);

// The reply to ACQUIRESET of `members` keys: one grant each, or nullopt for nil. Throws
// like parse_acquire, also for an array of another length.
std::optional<std::vector<GrantReply>> parse_acquire_set(const Reply& reply, std::size_t members,
                                                         std::string_view context);

// The :1 / :0 reply of RENEW, RELEASE and CHECK. Throws like parse_acquire.
bool parse_flag(const Reply& reply, std::string_view context);

// Checks a HELLO reply names server "wardend" with protocol 2 or later, and returns the
// protocol. Throws
// Error(permission_denied) for NOAUTH (a password is needed), Error(invalid_argument)
// when something else answers (e.g. Redis on the port), Error(unsupported) for an
// older wardend (protocol 1 has no owner secrets: anyone could release our grants,
// and retrying cannot help until the server is upgraded).
std::int64_t check_hello(const Reply& reply, std::string_view endpoint);

}  // namespace warden::engines::wardend
