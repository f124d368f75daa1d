// engines/postgres/pg_engine.h — postgres://: a fair read-write lock kept as PostgreSQL
// session-level advisory locks (docs/engines/postgres.md).
//
// Every grant and every waiting acquire has a connection (a server session) of its own,
// taken from a pool. A lock's advisory key is its row id in the registry (pg_schema.h).
// One round trip takes the lock (waiting in PostgreSQL's own lock queue, lock_timeout
// for a timed wait, PQcancel to cancel), draws the token from a sequence, takes the
// grant's marker lock and sets idle_session_timeout to the TTL: the lease is the session,
// and the server ends a session idle for a TTL, freeing its locks. The watchdog's renewal
// is a round trip on that session (restarting the server's idle clock); a holder that
// dies frees its locks as soon as the server sees its connection close.
//
// Only the session that holds an advisory lock can unlock it: renew and release act
// only on grants whose connection this engine instance holds.
//
// PostgreSQL's lock queue is FIFO among conflicting requests, and a request that
// conflicts with a waiting one queues behind it: fair. Barging is refused (no request
// can jump that queue), and so is lock-delay.
//
// A semaphore's request is one round trip too (SCHEMA.acquire_permits): alone in the
// semaphore it is granted at once; otherwise it queues in the semaphore's turnstile
// key and, at its head, counts the permits held until its own fit. An election's
// campaign is a lock grant whose statement also writes the candidate's value
// (SCHEMA.leaders); proclaim rewrites it on the grant's own session.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "core/uri.h"
#include "warden/options.h"

namespace warden::engines::postgres {

class PgConnection;
struct QueryLimits;

// Connects once (checking the credentials and the database) and installs the registry
// if it is missing. Throws Error(invalid_argument) for a bad URI or an unknown database,
// permission_denied for refused credentials or a missing privilege, unavailable.
std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options);

// pg_inspect.cc: one lock's holders (tokens from their marker locks) and waiters (in
// the order they started waiting), and a group's locks with anyone holding or waiting,
// from pg_locks joined with the registry. One read each; change nothing.
LockStatus inspect_on(PgConnection& conn, const std::string& schema, const core::LockKey& key,
                      const QueryLimits& limits);
std::vector<LockSummary> list_on(PgConnection& conn, const std::string& schema,
                                 std::string_view group, const QueryLimits& limits);

}  // namespace warden::engines::postgres
