// postgres://'s status: pg_locks joined with the registry. A holder's token is its
// session's marker lock (key -token, pg_schema.h); waiters are ordered by when they
// started waiting, which is PostgreSQL's queue order.
#include <algorithm>

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

LockStatus inspect_on(PgConnection& conn, const std::string& schema, const core::LockKey& key,
                      const QueryLimits& limits) {
  const std::string sql =
      "SELECT p.mode, p.granted, (SELECT -((m.classid::bigint << 32) | m.objid::bigint) "
      "  FROM pg_locks m WHERE m.pid = p.pid AND m.locktype = 'advisory' AND m.objsubid = 1 "
      "  AND m.granted AND m.database = p.database AND m.classid::bigint >= 2147483648 "
      "  LIMIT 1) AS token "
      "FROM " +
      quoted(schema) + ".locks k JOIN pg_locks p ON " + kLockRows +
      " WHERE k.grp = $1 AND k.name = $2::bytea "
      "ORDER BY p.granted DESC, token, p.waitstart NULLS LAST";
  const Reply reply = conn.query(sql, {Param::text(key.group), Param::binary(key.name)}, limits);
  if (!reply.ok()) throw_reply(reply, "reading the status of " + key.joined());
  LockStatus status;
  status.group = key.group;
  status.name = key.name;
  for (int row = 0; row < reply.rows(); ++row) {
    const Mode mode = reply.text(row, 0) == "ShareLock" ? Mode::shared : Mode::exclusive;
    if (reply.text(row, 1) == "t") {
      // A holder between taking the lock and its marker (inside the grant's round trip)
      // has no token yet: it is not a grant yet.
      if (reply.null(row, 2)) continue;
      status.holders.push_back(
          HolderStatus{mode, static_cast<std::uint64_t>(reply.integer(row, 2)), std::nullopt});
    } else {
      status.waiters.push_back(WaiterStatus{mode, std::nullopt});
    }
  }
  return status;
}

std::vector<LockSummary> list_on(PgConnection& conn, const std::string& schema,
                                 std::string_view group, const QueryLimits& limits) {
  const std::string sql =
      "SELECT encode(k.name, 'hex'), count(*) FILTER (WHERE p.granted), "
      "count(*) FILTER (WHERE NOT p.granted) "
      "FROM " +
      quoted(schema) + ".locks k JOIN pg_locks p ON " + kLockRows +
      " WHERE k.grp = $1 GROUP BY k.name ORDER BY k.name";
  const Reply reply = conn.query(sql, {Param::text(std::string(group))}, limits);
  if (!reply.ok()) throw_reply(reply, "listing the locks of " + std::string(group));
  std::vector<LockSummary> out;
  for (int row = 0; row < reply.rows(); ++row) {
    const std::string hex = reply.text(row, 0);
    LockSummary summary;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
      summary.name.push_back(static_cast<char>(hex_digit(hex[i]) * 16 + hex_digit(hex[i + 1])));
    }
    summary.holders = static_cast<std::size_t>(reply.integer(row, 1));
    summary.waiters = static_cast<std::size_t>(reply.integer(row, 2));
    out.push_back(std::move(summary));
  }
  return out;
}

}  // namespace warden::engines::postgres
