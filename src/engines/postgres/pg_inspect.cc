// postgres://'s status: pg_locks joined with the registry. A holder's token is its
// session's marker lock (key -token, pg_schema.h); waiters are ordered by when they
// started waiting, which is PostgreSQL's queue order. A semaphore's requests are read
// from its key block (N, k, turnstile); an election's value from SCHEMA.leaders.
#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "engines/postgres/pg_connection.h"
#include "engines/postgres/pg_engine.h"
#include "engines/postgres/pg_schema.h"
#include "warden/error.h"

namespace warden::engines::postgres {
namespace {

// pg_locks rows of the bigint advisory key k.id in this database.
constexpr const char* kLockRows =
    "p.locktype = 'advisory' AND p.objsubid = 1 "
    "AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND p.classid = ((k.id >> 32) & 4294967295)::oid AND p.objid = (k.id & 4294967295)::oid";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  throw Error(Errc::internal, "PostgreSQL answered a name that is not hex");
}

}  // namespace

namespace {

// The requests of the semaphore (group $1, name $2), one row each: its N, its k, its
// token (NULL while it waits), whether it holds the turnstile (the head of the queue),
// when it started waiting there. Grants first in token order, then the queue in order.
std::string semaphore_sql(const std::string& q) {
  return "WITH k AS (SELECT (1::bigint << 62) + id * 2097152 AS base FROM " + q +
         ".locks WHERE grp = $1 AND name = $2::bytea), "
         // A marker held shared is a head looking whether it came free, not a grant.
         "a AS MATERIALIZED (SELECT pid, granted, waitstart, "
         "  CASE WHEN key < 0 AND mode <> 'ExclusiveLock' THEN NULL ELSE key END AS key "
         "  FROM (SELECT l.pid, l.granted, l.waitstart, l.mode, "
         "    (l.classid::bigint << 32) | l.objid::bigint AS key FROM pg_locks l "
         "    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = "
         "    (SELECT oid FROM pg_database WHERE datname = current_database())) x), "
         "s AS (SELECT c.pid, c.key - k.base AS capacity, k.base FROM a c, k "
         "  WHERE c.granted AND c.key BETWEEN k.base + 1 AND k.base + 1048576) "
         "SELECT s.capacity, "
         "  (SELECT r.key - s.base - 1048576 FROM a r WHERE r.pid = s.pid AND r.granted "
         "    AND r.key BETWEEN s.base + 1048577 AND s.base + 2097150 LIMIT 1) AS permits, "
         "  (SELECT -m.key FROM a m WHERE m.pid = s.pid AND m.granted AND m.key < 0 LIMIT 1) "
         "    AS token, "
         "  (SELECT t.granted FROM a t WHERE t.pid = s.pid AND t.key = s.base LIMIT 1) AS head, "
         "  (SELECT t.waitstart FROM a t WHERE t.pid = s.pid AND t.key = s.base LIMIT 1) AS since "
         "FROM s ORDER BY token NULLS LAST, head DESC NULLS LAST, since NULLS LAST";
}

std::string lock_sql(const std::string& q) {
  return "SELECT p.mode, p.granted, (SELECT -((m.classid::bigint << 32) | m.objid::bigint) "
         "  FROM pg_locks m WHERE m.pid = p.pid AND m.locktype = 'advisory' AND m.objsubid = 1 "
         "  AND m.granted AND m.mode = 'ExclusiveLock' AND m.database = p.database "
         "  AND m.classid::bigint >= 2147483648 "
         "  LIMIT 1) AS token, "
         "  EXISTS (SELECT 1 FROM pg_locks x WHERE x.pid = p.pid AND x.locktype = 'virtualxid' "
         "    AND x.granted) AS busy "
         "FROM " +
         q + ".locks k JOIN pg_locks p ON " + kLockRows +
         " WHERE k.grp = $1 AND k.name = $2::bytea "
         "ORDER BY p.granted DESC, token, p.waitstart NULLS LAST";
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(hex_digit(hex[i]) * 16 + hex_digit(hex[i + 1])));
  }
  return out;
}

// How long inspect waits for a campaign's grant statement to commit its value.
constexpr int kValueAttempts = 500;
constexpr std::chrono::milliseconds kValuePause{2};

}  // namespace

LockStatus inspect_on(PgConnection& conn, const std::string& schema, const core::LockKey& key,
                      const QueryLimits& limits) {
  const std::string q = quoted(schema);
  const std::vector<Param> params{Param::text(key.group), Param::binary(key.name)};
  LockStatus status;
  status.group = key.group;
  status.name = key.name;

  const Reply semaphore = conn.query(semaphore_sql(q), params, limits);
  if (!semaphore.ok()) throw_reply(semaphore, "reading the status of " + key.joined());
  for (int row = 0; row < semaphore.rows(); ++row) {
    if (semaphore.null(row, 1)) continue;  // still entering: neither waits nor holds yet
    status.permits = static_cast<std::uint32_t>(semaphore.integer(row, 0));
    const auto permits = static_cast<std::uint32_t>(semaphore.integer(row, 1));
    if (!semaphore.null(row, 2)) {
      HolderStatus holder{Mode::shared, static_cast<std::uint64_t>(semaphore.integer(row, 2)),
                          std::nullopt};
      holder.permits = permits;
      status.holders.push_back(std::move(holder));
    } else {
      WaiterStatus waiter{Mode::shared, std::nullopt};
      waiter.permits = permits;
      status.waiters.push_back(waiter);
    }
  }
  if (status.permits > 0) return status;

  for (int attempt = 1;; ++attempt) {
    status.holders.clear();
    status.waiters.clear();
    const Reply reply = conn.query(lock_sql(q), params, limits);
    if (!reply.ok()) throw_reply(reply, "reading the status of " + key.joined());
    std::optional<std::size_t> exclusive;  // index of the exclusive holder
    bool busy = false;                     // its session is inside a statement (maybe its grant's)
    for (int row = 0; row < reply.rows(); ++row) {
      const Mode mode = reply.text(row, 0) == "ShareLock" ? Mode::shared : Mode::exclusive;
      if (reply.text(row, 1) == "t") {
        // A holder between taking the lock and its marker (inside the grant's round
        // trip) has no token yet: it is not a grant yet.
        if (reply.null(row, 2)) continue;
        if (mode == Mode::exclusive) {
          exclusive = status.holders.size();
          busy = reply.text(row, 3) == "t";
        }
        status.holders.push_back(
            HolderStatus{mode, static_cast<std::uint64_t>(reply.integer(row, 2)), std::nullopt});
      } else {
        status.waiters.push_back(WaiterStatus{mode, std::nullopt});
      }
    }
    if (!exclusive) return status;
    // An election's value: the leaders row of the holder's own token. Read after the
    // holders (a later snapshot): a holder whose session was idle then had committed
    // its grant, value included. One inside a statement may be inside its grant, whose
    // value commits when the statement ends: looked at again, never shown without it.
    HolderStatus& holder = status.holders[*exclusive];
    const Reply value =
        conn.query("SELECT v.token, encode(v.value, 'hex') FROM " + q + ".leaders v JOIN " + q +
                       ".locks k ON k.id = v.lock_id "
                       "WHERE k.grp = $1 AND k.name = $2::bytea",
                   params, limits);
    // A user granted the lock tables only (docs/engines/postgres.md) sees no values.
    if (!value.ok() && value.sqlstate() == "42501") return status;
    if (!value.ok()) throw_reply(value, "reading the leader's value of " + key.joined());
    if (value.rows() == 1 && static_cast<std::uint64_t>(value.integer(0, 0)) == holder.token) {
      holder.value = unhex(value.text(0, 1));
      return status;
    }
    if (!busy) return status;  // a lock's holder, not a campaign's: no value
    if (attempt == kValueAttempts) {
      throw Error(Errc::unavailable, "postgres://: the value of " + key.joined() +
                                         "'s holder did not become readable");
    }
    std::this_thread::sleep_for(kValuePause);
  }
}

std::vector<LockSummary> list_on(PgConnection& conn, const std::string& schema,
                                 std::string_view group, const QueryLimits& limits) {
  // A session on the lock id holds a grant once it holds a marker too: a semaphore's
  // waiters hold the id (shared) while they wait, a lock's holder for a moment before
  // its marker.
  const std::string sql =
      "WITH marked AS MATERIALIZED (SELECT DISTINCT pid FROM pg_locks WHERE "
      "  locktype = 'advisory' AND objsubid = 1 AND granted AND classid::bigint >= 2147483648), "
      "p AS MATERIALIZED (SELECT *, granted AND pid IN (SELECT pid FROM marked) AS held FROM "
      "  pg_locks) "
      "SELECT encode(k.name, 'hex'), count(*) FILTER (WHERE p.held), "
      "count(*) FILTER (WHERE NOT p.held) "
      "FROM " +
      quoted(schema) + ".locks k JOIN p ON " + kLockRows +
      " WHERE k.grp = $1 GROUP BY k.name ORDER BY k.name";
  const Reply reply = conn.query(sql, {Param::text(std::string(group))}, limits);
  if (!reply.ok()) throw_reply(reply, "listing the locks of " + std::string(group));
  std::vector<LockSummary> out;
  for (int row = 0; row < reply.rows(); ++row) {
    LockSummary summary;
    summary.name = unhex(reply.text(row, 0));
    summary.holders = static_cast<std::size_t>(reply.integer(row, 1));
    summary.waiters = static_cast<std::size_t>(reply.integer(row, 2));
    out.push_back(std::move(summary));
  }
  return out;
}

}  // namespace warden::engines::postgres
