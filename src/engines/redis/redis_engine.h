// engines/redis/redis_engine.h — redis://: a fair, reentrant (in the core), read-write
// lock kept in one Redis server by Lua scripts (lua/*.lua, docs/engines/redis.md).
//
// Connections, all to the one server of the URI (on redis+cluster://, the same per master,
// through resp_client::ClusterRouter, each call sent to its lock's slot's master):
//   - `pool` pipelined connections for every script call (acquire attempts, releases,
//     renewals, checks): none of them blocks on the server, so concurrent calls of
//     many threads travel together in one round trip (resp_client::Pipeline);
//   - one subscriber connection, opened when a first waiter must wait (subscriber.h).
//
// A waiting acquire: an attempt either grants or queues the request (its entry, with a
// liveness deadline) at the tail of the lock's one FIFO queue, fair or not: fairness
// decides only whether a new request may be granted past the waiters; then the waiter sleeps until
// a message admits it, until the next poll (ClientOptions::retry, capped at waiter_ttl / 3, which
// also refreshes its liveness), or until something in the lock runs out by itself (the script says
// when), and attempts again. A timed-out or cancelled wait withdraws its entry.
//
// Expiry estimates: a grant or renewal made by a script call expires no earlier than
// the call's send time plus its ttl (the script sets the deadline from Redis' clock
// when it runs, which is after we sent it).
//
// open() connects one pipelined connection and PINGs, so a wrong address or password
// fails Client::open with a clear error.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "core/uri.h"
#include "engines/resp_client/pipeline.h"
#include "warden/options.h"

namespace warden::engines::redis {

// Throws Error(invalid_argument) for a bad URI; unavailable / deadline_exceeded /
// permission_denied if Redis cannot be reached or refuses us.
std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options);

// redis_inspect.cc: one lock's status from one MULTI of reads (holders, admitted and
// queued waiters, lock-delay, measured on Redis' TIME), and a group's locks by SCAN.
// Write nothing. Throw like every pipelined call.
LockStatus inspect_on(resp_client::Pipeline& pipeline, const core::LockKey& key,
                      const std::string& endpoint);
std::vector<LockSummary> list_on(resp_client::Pipeline& pipeline, std::string_view group,
                                 const std::string& endpoint);

}  // namespace warden::engines::redis
