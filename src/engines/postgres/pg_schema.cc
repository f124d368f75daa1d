#include "engines/postgres/pg_schema.h"

#include "warden/error.h"

namespace warden::engines::postgres {

std::string quoted(const std::string& schema) { return '"' + schema + '"'; }

GrantStatement grant_statement(const std::string& schema, bool shared, GrantWait wait,
                               bool set_ttl) {
  const std::string lock = shared ? "pg_advisory_lock_shared" : "pg_advisory_lock";
  GrantStatement out;
  out.name = std::string("warden_grant_") + (shared ? 's' : 'x') +
             (wait == GrantWait::forever ? 'f'
              : wait == GrantWait::timed ? 't'
                                         : 'n') +
             (set_ttl ? "_ttl" : "");
  // Each step reads the row of the one before, so each runs only after it: the lock,
  // then (if granted) the token, then the marker lock and the lease's idle limit.
  std::string sql = "WITH ";
  int next = 2;
  if (wait == GrantWait::timed) {
    sql += "c AS MATERIALIZED (SELECT set_config('lock_timeout', $" + std::to_string(next++) +
           ", true)), l AS MATERIALIZED (SELECT " + lock + "($1) FROM c), ";
  } else if (wait == GrantWait::forever) {
    sql += "l AS MATERIALIZED (SELECT " + lock + "($1)), ";
  } else {
    sql += "l AS MATERIALIZED (SELECT pg_try_" + lock.substr(3) + "($1) AS ok), ";
  }
  sql += "t AS MATERIALIZED (SELECT nextval('" + quoted(schema) + ".tokens') AS token FROM l" +
         (wait == GrantWait::none ? " WHERE ok" : "") + ") SELECT token, pg_advisory_lock(-token)";
  if (set_ttl) {
    sql += ", set_config('idle_session_timeout', $" + std::to_string(next++) + ", false)";
  }
  out.sql = sql + " FROM t";
  out.params = next - 1;
  return out;
}

namespace {

std::string installed_sql(const std::string& s) {
  const std::string q = quoted(s);
  return "SELECT to_regclass('" + q + ".locks') IS NOT NULL AND to_regclass('" + q +
         ".tokens') IS NOT NULL AND to_regprocedure('" + q +
         ".fence(text,bytea,bigint)') IS NOT NULL AND to_regprocedure('" + q +
         ".fence(text,text,bigint)') IS NOT NULL AND obj_description(to_regprocedure('" + q +
         ".grant(bigint,boolean,boolean,integer,integer)'), 'pg_proc') IS NOT DISTINCT FROM '" +
         kSchemaVersion + "'";
}

// One transaction: the advisory xact lock 0 makes concurrent installers take turns, and
// every statement is idempotent, so the second one changes nothing.
std::string install_sql(const std::string& s) {
  const std::string q = quoted(s);
  return "BEGIN;"
         "SELECT pg_advisory_xact_lock(0);"
         "CREATE SCHEMA IF NOT EXISTS " +
         q +
         ";"
         "CREATE TABLE IF NOT EXISTS " +
         q +
         ".locks ("
         "  id bigserial PRIMARY KEY,"
         "  grp text NOT NULL,"
         "  name bytea NOT NULL,"
         "  fenced bigint NOT NULL DEFAULT 0,"
         "  UNIQUE (grp, name));"
         "CREATE SEQUENCE IF NOT EXISTS " +
         q +
         ".tokens;"
         "CREATE OR REPLACE FUNCTION " +
         q +
         ".grant(lock_id bigint, shared boolean, wait boolean,"
         "    wait_ms integer, ttl_ms integer) RETURNS bigint LANGUAGE plpgsql AS $warden$\n"
         "DECLARE token bigint;\n"
         "BEGIN\n"
         "  IF wait THEN\n"
         "    PERFORM set_config('lock_timeout', wait_ms::text, true);\n"
         "    IF shared THEN PERFORM pg_advisory_lock_shared(lock_id);\n"
         "    ELSE PERFORM pg_advisory_lock(lock_id); END IF;\n"
         "  ELSIF shared THEN\n"
         "    IF NOT pg_try_advisory_lock_shared(lock_id) THEN RETURN NULL; END IF;\n"
         "  ELSIF NOT pg_try_advisory_lock(lock_id) THEN RETURN NULL;\n"
         "  END IF;\n"
         "  token := nextval('" +
         q +
         ".tokens');\n"
         "  PERFORM pg_advisory_lock(-token);\n"
         "  PERFORM set_config('idle_session_timeout', ttl_ms::text, false);\n"
         "  RETURN token;\n"
         "END $warden$;"
         "COMMENT ON FUNCTION " +
         q + ".grant(bigint,boolean,boolean,integer,integer) IS '" + kSchemaVersion +
         "';"
         "CREATE OR REPLACE FUNCTION " +
         q +
         ".fence(grp text, name bytea, token bigint)"
         "  RETURNS boolean LANGUAGE sql VOLATILE AS $warden$\n"
         "  WITH admitted AS (UPDATE " +
         q +
         ".locks AS l SET fenced = $3"
         "    WHERE l.grp = $1 AND l.name = $2 AND l.fenced <= $3 RETURNING 1)\n"
         "  SELECT EXISTS (SELECT 1 FROM admitted)\n"
         "$warden$;"
         "CREATE OR REPLACE FUNCTION " +
         q +
         ".fence(grp text, name text, token bigint)"
         "  RETURNS boolean LANGUAGE sql VOLATILE AS $warden$\n"
         "  SELECT " +
         q +
         ".fence($1, convert_to($2, 'UTF8'), $3)\n"
         "$warden$;"
         "COMMIT;";
}

[[noreturn]] void install_failed(const Reply& reply, const std::string& schema) {
  if (reply.sqlstate() == "42501") {
    throw Error(Errc::permission_denied,
                "postgres://: cannot create the lock registry (schema " + schema +
                    "): " + reply.message() +
                    ". The user needs the CREATE privilege on the database (or on the "
                    "schema, if it exists), or an administrator opens the engine once so the "
                    "registry exists (docs/engines/postgres.md)");
  }
  throw_reply(reply, "creating the lock registry in schema " + schema);
}

}  // namespace

void install(PgConnection& conn, const std::string& schema, const QueryLimits& limits) {
  const Reply present = conn.query(installed_sql(schema), {}, limits);
  if (!present.ok()) throw_reply(present, "looking for the lock registry");
  if (present.text(0, 0) == "t") return;
  const Reply done = conn.script(install_sql(schema), limits);
  if (!done.ok()) {
    conn.script("ROLLBACK", limits);
    install_failed(done, schema);
  }
}

std::int64_t lock_id(PgConnection& conn, const std::string& schema, const core::LockKey& key,
                     const QueryLimits& limits) {
  const std::string q = quoted(schema);
  const std::vector<Param> params{Param::text(key.group), Param::binary(key.name)};
  const std::string select = "SELECT id FROM " + q + ".locks WHERE grp = $1 AND name = $2::bytea";
  // Read, insert, read again: a row another session inserted since this statement's
  // snapshot makes the insert do nothing, and the next statement's snapshot sees it.
  for (int attempt = 0; attempt < 3; ++attempt) {
    Reply found = conn.query(select, params, limits);
    if (!found.ok()) throw_reply(found, "reading the lock registry");
    if (found.rows() == 1) return found.integer(0, 0);
    Reply inserted = conn.query("INSERT INTO " + q +
                                    ".locks (grp, name) VALUES ($1, $2::bytea) "
                                    "ON CONFLICT (grp, name) DO NOTHING RETURNING id",
                                params, limits);
    if (!inserted.ok()) throw_reply(inserted, "adding " + key.joined() + " to the lock registry");
    if (inserted.rows() == 1) return inserted.integer(0, 0);
  }
  throw Error(Errc::internal,
              "postgres://: " + key.joined() + " is neither in the registry nor can it be added");
}

}  // namespace warden::engines::postgres
