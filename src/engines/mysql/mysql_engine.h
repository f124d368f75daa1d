// engines/mysql/mysql_engine.h — mysql://: an exclusive lock on one MariaDB server
// (10.5 or later) through GET_LOCK, with the session as the lease (docs/engines/mysql.md).
//
// A lock (group, name) is a row of warden_locks (registry_schema.h); its name on the
// server is "warden:DATABASE:ID". An acquire runs on a session of its own, in one round
// trip: SET SESSION wait_timeout = ceil(TTL), GET_LOCK(name, wait), and — only if
// granted — the token, the next value of the warden_tokens sequence, with a second lock
// "NAME/TOKEN" that tells other sessions which token the holder has. The session then
// belongs to the grant: the watchdog's renewal is a round trip on it (resetting the
// server's idle clock), release is RELEASE_ALL_LOCKS on it. A holder that dies
// frees the lock when its socket closes; one that stops talking is disconnected by the
// server after wait_timeout, which frees it too.
//
// Exclusive only (shared is refused as unsupported); FIFO, since the server queues
// GET_LOCK waiters in arrival order; no barging, no lock-delay. A cancelled wait is
// ended by KILL QUERY from another session; a timed-out one by GET_LOCK's own timeout;
// neither leaves anything on the server.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "core/uri.h"
#include "warden/options.h"

namespace warden::engines::mysql {

// Throws Error(invalid_argument) for a bad URI or an unknown database,
// permission_denied for refused credentials or missing rights to create the registry,
// unavailable / deadline_exceeded if the server cannot be reached.
std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options);

class Pool;

// mysql_inspect.cc: one lock's holder (from IS_USED_LOCK and its token lock) and its
// waiters (sessions the server shows in state "User lock" on the lock's GET_LOCK), and
// a group's locks that are held or waited for, paged by name. Read only.
LockStatus inspect_on(Pool& pool, const core::LockKey& key);
std::vector<LockSummary> list_on(Pool& pool, std::string_view group);

}  // namespace warden::engines::mysql
