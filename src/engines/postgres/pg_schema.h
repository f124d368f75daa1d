// engines/postgres/pg_schema.h — the registry the engine keeps in the database, and the
// SQL it runs there (docs/engines/postgres.md).
//
//   SCHEMA.locks   (id bigserial, grp text, name bytea, fenced bigint, unique (grp, name))
//                  one row per lock ever used; id is the lock's advisory lock key, so two
//                  locks never share one (no hashing). Names are bytea: a lock name may
//                  hold any byte but NUL, which a text column in a UTF-8 database cannot.
//                  fenced is the highest token SCHEMA.fence() admitted.
//   SCHEMA.tokens  the sequence every grant draws its token from
//   SCHEMA.grant(lock_id, shared, wait, wait_ms, ttl_ms)
//                  takes the advisory lock (waiting up to wait_ms, 0 = forever, or not
//                  at all), draws the token, takes the grant's marker lock (key -token)
//                  and sets idle_session_timeout = ttl_ms: one round trip. NULL when a
//                  try finds the lock busy.
//   SCHEMA.leaders (lock_id, token, value bytea)
//                  an election's value: the campaign that was granted token on lock_id
//                  wrote it in its grant's statement; believed only while a session
//                  holds the lock with the marker of that token.
//   SCHEMA.acquire_permits(lock_id, capacity, permits, wait, wait_ms, ttl_ms)
//                  a semaphore's request (pg_engine.cc): NULL for a try that does not
//                  fit; -1 when the registry has another N (set_permits first); 22023
//                  for a lock of that name in use.
//   SCHEMA.set_permits(lock_id, capacity) -> boolean
//                  sets locks.semaphore_permits while nobody is in the semaphore.
//   SCHEMA.lock_checked(lock_id, shared, wait, wait_ms, ttl_ms, elect, value)
//                  grant() for a name that has been a semaphore (semaphore_permits set):
//                  refuses with 22023 while the semaphore is in use.
//   SCHEMA.fence(grp, name, token) -> boolean
//                  records token as the lock's highest and returns true iff it is at
//                  least the highest recorded; for UPDATE ... WHERE SCHEMA.fence(...)
//                  in the caller's own transaction. name as text (UTF-8) or bytea.
//
// Advisory keys (bigint form) the engine uses: > 0 lock ids, < 0 grant markers (-token),
// 0 the installation's own lock, and from 2^62 up the semaphores' keys: lock id I has the
// block B = 2^62 + I * 2^21 (semaphore_base), B the turnstile, B + N the number of
// permits, B + 2^20 + k a request for k, B + 2^21 - 1 any request. The two-int4 form is left to
// applications.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/engine.h"
#include "engines/postgres/pg_connection.h"
#include "warden/error.h"

namespace warden::engines::postgres {

// Bumped when the SQL of the functions changes: an older installation is replaced.
inline constexpr const char* kSchemaVersion = "warden registry 6";

// Creates the registry in `schema` if it is missing or older, under an advisory
// transaction lock, so concurrent first uses do not race. Throws Error:
// permission_denied naming the privilege the user lacks, unavailable, ...
void install(PgConnection& conn, const std::string& schema, const QueryLimits& limits);

// The advisory key of (group, name), created in the registry on first use; race-free
// against concurrent first uses. Throws Error like install.
std::int64_t lock_id(PgConnection& conn, const std::string& schema, const core::LockKey& key,
                     const QueryLimits& limits);
// lock_id's one statement and its parameters, for a caller that sends it itself: the
// id, or nullopt when a concurrent first use raced it (ask again, up to kLockIdAttempts
// times; then throw lock_id_missing). lock_id_of throws Error for an error reply.
inline constexpr int kLockIdAttempts = 3;
std::string lock_id_sql(const std::string& schema);
std::vector<Param> lock_id_params(const core::LockKey& key);
std::optional<std::int64_t> lock_id_of(const Reply& reply, const core::LockKey& key);
Error lock_id_missing(const core::LockKey& key);

// How a grant waits: not at all (a try), until lock_timeout, or for as long as it takes.
enum class GrantWait { none, timed, forever };

// One grant as a plain SQL statement (no plpgsql call), prepared once per session under
// `name`: takes the advisory lock $1 (bigint), with lock_timeout = $2 when timed, draws
// the token, takes the marker lock (key -token) and, with set_ttl, sets
// idle_session_timeout = the last parameter (milliseconds, text). One row (token) when
// granted; no row when a try finds the lock busy. Does what SCHEMA.grant() does, which
// stays installed for clients that call it.
struct GrantStatement {
  std::string name;
  std::string sql;
  int params = 1;
};
// With `elect`, the last parameter is a candidate's value (bytea, binary), upserted into
// SCHEMA.leaders with the token in the same statement. A name flagged as a semaphore
// (locks.semaphore_permits set) takes nothing and answers -1: SCHEMA.lock_checked() decides.
GrantStatement grant_statement(const std::string& schema, bool shared, GrantWait wait, bool set_ttl,
                               bool elect);

// Makes `permits` the semaphore's N in the registry (locks.semaphore_permits), unless a
// request of it is in with another N: then false, after trying for a moment. Committed
// before the request that needed it takes anything, it also flags the name, so that
// lock grants of it go the checked way.
bool set_permits(PgConnection& conn, const std::string& schema, std::int64_t id,
                 std::uint32_t permits, const QueryLimits& limits);
// set_permits's statement and parameters, and what its reply says (throws Error for an
// error reply), for a caller that sends it itself.
std::string set_permits_sql(const std::string& schema);
std::vector<Param> set_permits_params(std::int64_t id, std::uint32_t permits);
bool permits_set(const Reply& reply);

// Semaphores need lock ids below this (their key block must stay below 2^63).
inline constexpr std::int64_t kMaxSemaphoreLockId = std::int64_t{1} << 40;
inline std::int64_t semaphore_base(std::int64_t lock_id) {
  return (std::int64_t{1} << 62) + lock_id * (std::int64_t{1} << 21);
}
std::string quoted(const std::string& schema);

// pg_locks shows a bigint advisory key k as classid = k >> 32, objid = k & 0xffffffff
// (unsigned), objsubid = 1.
inline std::uint32_t key_high(std::int64_t key) {
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(key) >> 32);
}
inline std::uint32_t key_low(std::int64_t key) {
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(key));
}

}  // namespace warden::engines::postgres
