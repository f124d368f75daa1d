// engines/warden/warden_engine.h — warden://: the client of warden's own lock server,
// wardend (docs/protocol.md).
//
// Connections, all to the one server of the URI:
//   - a pool for ACQUIRE: a parked ACQUIRE occupies its connection until answered, so
//     each concurrently waiting acquire takes a connection of its own (?pool=N caps
//     them); a try borrows one for a round trip;
//   - one control connection for RENEW, RELEASE, CHECK and HELLO, shared by every
//     thread through a resp_client::Pipeline: concurrent calls (the watchdog's batch,
//     releases from many threads) travel together in one pipelined round trip, and
//     are never stuck behind a parked ACQUIRE.
// Grants live on the server by token, not by connection, so a renewal or release on
// any connection (also after a reconnect) reaches them.
//
// Expiry estimates: a grant expires no earlier than send_time + waited_us + ttl (the
// server's own wait, reported in the reply, on our clock from when we sent); a renewal
// moves it to send_time + ttl of its round.
//
// Cancellation: see acquire_call.h — a stopped wait half-closes its connection, so the
// server drops the waiter at once or tells us it granted first (we release that grant).
//
// Restart embargo: after a restart wardend answers ACQUIRE with STARTING until every
// lease from before may have run out. A try then reports "not granted"; a wait sleeps
// (by the RetryPolicy's back-off, interruptibly) and asks again until its deadline.
//
// open() connects the control connection and checks HELLO, so a wrong address, a
// missing or wrong password, or a server that is not wardend fails Client::open with
// a clear error.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "core/uri.h"
#include "engines/resp_client/pipeline.h"
#include "warden/options.h"

namespace warden::engines::wardend {

// Throws Error(invalid_argument) for a bad URI; unavailable / deadline_exceeded /
// permission_denied if wardend cannot be reached or refuses us.
std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options);

// warden_inspect.cc: INSPECT one lock, and LIST a group page by page until the server
// says the listing is complete. Throw like every control-connection call.
LockStatus inspect_on(resp_client::Pipeline& control, const core::LockKey& key,
                      const std::string& endpoint);
std::vector<LockSummary> list_on(resp_client::Pipeline& control, std::string_view group,
                                 const std::string& endpoint);

}  // namespace warden::engines::wardend
