#include "engines/postgres/pg_schema.h"

#include "warden/error.h"

namespace warden::engines::postgres {

std::string quoted(const std::string& schema) { return '"' + schema + '"'; }

GrantStatement grant_statement(const std::string& schema, bool shared, GrantWait wait, bool set_ttl,
                               bool elect) {
  const std::string q = quoted(schema);
  const std::string lock = shared ? "pg_advisory_lock_shared" : "pg_advisory_lock";
  GrantStatement out;
  out.name = std::string("warden_grant_") + (shared ? 's' : 'x') +
             (wait == GrantWait::forever ? 'f'
              : wait == GrantWait::timed ? 't'
                                         : 'n') +
             (set_ttl ? "_ttl" : "") + (elect ? "_v" : "");
  // Each step reads the row of the one before, so each runs only after it: the
  // semaphore flag, the lock (only for a name never used as a semaphore), then (if
  // granted) the token, then the marker lock and the lease's idle limit, then the
  // candidate's value. A flagged name takes nothing and answers -1: the caller goes the
  // checked way (SCHEMA.lock_checked).
  std::string sql =
      "WITH f AS MATERIALIZED (SELECT coalesce((SELECT semaphore_permits IS NOT NULL FROM " + q +
      ".locks WHERE id = $1::bigint), false) AS flagged), ";
  int next = 2;
  if (wait == GrantWait::timed) {
    sql += "c AS MATERIALIZED (SELECT set_config('lock_timeout', $" + std::to_string(next++) +
           ", true) FROM f WHERE NOT flagged), l AS MATERIALIZED (SELECT " + lock +
           "($1) FROM c), ";
  } else if (wait == GrantWait::forever) {
    sql += "l AS MATERIALIZED (SELECT " + lock + "($1) FROM f WHERE NOT flagged), ";
  } else {
    sql += "l AS MATERIALIZED (SELECT pg_try_" + lock.substr(3) +
           "($1) AS ok FROM f WHERE NOT flagged), ";
  }
  sql += "t AS MATERIALIZED (SELECT nextval('" + q + ".tokens') AS token FROM l" +
         (wait == GrantWait::none ? " WHERE ok" : "") +
         "), m AS MATERIALIZED (SELECT token, pg_advisory_lock(-token)";
  if (set_ttl) {
    sql += ", set_config('idle_session_timeout', $" + std::to_string(next++) + ", false)";
  }
  sql += " FROM t)";
  std::string granted = "m";
  if (elect) {
    sql += ", w AS (INSERT INTO " + q +
           ".leaders AS v (lock_id, token, value) SELECT $1::bigint, token, $" +
           std::to_string(next++) +
           "::bytea FROM m ON CONFLICT (lock_id) DO UPDATE SET token = excluded.token, "
           "value = excluded.value RETURNING token)";
    granted = "w";
  }
  out.sql = sql + " SELECT token FROM " + granted + " UNION ALL SELECT -1 FROM f WHERE flagged";
  out.params = next - 1;
  return out;
}

namespace {

// Replaces every "@S" in `sql` with the quoted schema.
std::string in_schema(std::string sql, const std::string& q) {
  for (auto at = sql.find("@S"); at != std::string::npos; at = sql.find("@S", at + q.size())) {
    sql.replace(at, 2, q);
  }
  return sql;
}

// Semaphores and elections (docs/engines/postgres.md, Semaphores and Elections). The
// semaphore keys of lock id I lie in the block B = 2^62 + I * 2^21 (semaphore_base):
// B the turnstile, B + N "a request of a semaphore of N permits" (1 <= N <= 2^20),
// B + 2^20 + k "a request for k permits", B + 2^21 - 1 "a request of the semaphore"
// (every request, shared; exclusive only while nobody else is in); no lock id (< 2^40)
// nor marker (< 0) reaches them.
constexpr const char* kPrimitivesSql = R"sql(
ALTER TABLE @S.locks ADD COLUMN IF NOT EXISTS semaphore_permits integer;
CREATE TABLE IF NOT EXISTS @S.leaders (
  lock_id bigint PRIMARY KEY REFERENCES @S.locks (id),
  token bigint NOT NULL,
  value bytea NOT NULL);
CREATE OR REPLACE FUNCTION @S.advisory_keys()
  RETURNS TABLE (pid integer, granted boolean, waitstart timestamptz, key bigint)
  LANGUAGE sql VOLATILE AS $warden$
  SELECT l.pid, l.granted, l.waitstart, (l.classid::bigint << 32) | l.objid::bigint
    FROM pg_locks l
   WHERE l.locktype = 'advisory' AND l.objsubid = 1
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
$warden$;
CREATE OR REPLACE FUNCTION @S.semaphore_in_use(lock_id bigint) RETURNS boolean
  LANGUAGE plpgsql AS $warden$
DECLARE
  base bigint := (1::bigint << 62) + lock_id * 2097152;
BEGIN
  IF pg_try_advisory_lock(base + 2097151) THEN
    PERFORM pg_advisory_unlock(base + 2097151);
    RETURN false;
  END IF;
  -- Busy: a request of the semaphore holds it (shared), or another probe like this one
  -- does for a moment (exclusive).
  RETURN EXISTS (SELECT 1 FROM pg_locks l
                  WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                    AND l.mode = 'ShareLock'
                    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND (l.classid::bigint << 32) | l.objid::bigint = base + 2097151);
END $warden$;
CREATE OR REPLACE FUNCTION @S.lock_checked(lock_id bigint, shared boolean, wait boolean,
    wait_ms integer, ttl_ms integer, elect boolean, val bytea)
  RETURNS bigint LANGUAGE plpgsql AS $warden$
DECLARE token bigint;
BEGIN
  IF @S.semaphore_in_use(lock_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = 'the name is a semaphore in use: a lock and a semaphore of one name refuse each other';
  END IF;
  IF wait THEN
    PERFORM set_config('lock_timeout', wait_ms::text, true);
    IF shared THEN PERFORM pg_advisory_lock_shared(lock_id);
    ELSE PERFORM pg_advisory_lock(lock_id); END IF;
  ELSIF shared THEN
    IF NOT pg_try_advisory_lock_shared(lock_id) THEN RETURN NULL; END IF;
  ELSIF NOT pg_try_advisory_lock(lock_id) THEN RETURN NULL;
  END IF;
  -- A semaphore's requests hold the lock id shared too: one that came in meanwhile is
  -- seen now, or it saw this lock and refused itself.
  IF shared AND @S.semaphore_in_use(lock_id) THEN
    PERFORM pg_advisory_unlock_shared(lock_id);
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = 'the name is a semaphore in use: a lock and a semaphore of one name refuse each other';
  END IF;
  token := nextval('@S.tokens');
  PERFORM pg_advisory_lock(-token);
  PERFORM set_config('idle_session_timeout', ttl_ms::text, false);
  IF elect THEN
    INSERT INTO @S.leaders AS v (lock_id, token, value) VALUES (lock_id, token, val)
      ON CONFLICT ON CONSTRAINT leaders_pkey
      DO UPDATE SET token = excluded.token, value = excluded.value;
  END IF;
  RETURN token;
END $warden$;
CREATE OR REPLACE FUNCTION @S.set_permits(lock_id bigint, capacity integer)
  RETURNS boolean LANGUAGE plpgsql AS $warden$
DECLARE
  u bigint := (1::bigint << 62) + lock_id * 2097152 + 2097151;
BEGIN
  -- Only while nobody is in the semaphore; the transaction lock is let go after the
  -- new N commits, so a request that comes in next reads it.
  FOR attempt IN 1 .. 50 LOOP
    IF (SELECT l.semaphore_permits FROM @S.locks l WHERE l.id = lock_id) = capacity THEN
      RETURN true;
    END IF;
    IF pg_try_advisory_xact_lock(u) THEN
      UPDATE @S.locks l SET semaphore_permits = capacity WHERE l.id = lock_id;
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.002);
  END LOOP;
  RETURN false;
END $warden$;
CREATE OR REPLACE FUNCTION @S.acquire_permits(lock_id bigint, capacity integer,
    permits integer, wait boolean, wait_ms integer, ttl_ms integer)
  RETURNS bigint LANGUAGE plpgsql AS $warden$
DECLARE
  base bigint;
  u bigint;
  alone boolean;
  token bigint;
  held bigint;
  oldest bigint;
  oldest_permits bigint;
  pause double precision := 0.001;
  deadline timestamptz := clock_timestamp() + make_interval(secs => wait_ms / 1000.0);
BEGIN
  IF lock_id <= 0 OR lock_id >= (1::bigint << 40) OR capacity < 1 OR capacity > 1048576
     OR permits < 1 OR permits > capacity THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = format('no semaphore of %s permits for %s (lock id %s)', capacity, permits, lock_id);
  END IF;
  base := (1::bigint << 62) + lock_id * 2097152;
  u := base + 2097151;
  -- Held for the request's life, waiting or granted: in the semaphore, its N, its k.
  PERFORM pg_advisory_lock_shared(u);
  PERFORM pg_advisory_lock_shared(base + capacity);
  PERFORM pg_advisory_lock_shared(base + 1048576 + permits);
  -- While anyone is in, N is the registry's (set_permits changes it only when nobody is).
  IF (SELECT l.semaphore_permits FROM @S.locks l WHERE l.id = lock_id)
     IS DISTINCT FROM capacity THEN
    PERFORM pg_advisory_unlock_all();
    RETURN -1;
  END IF;
  alone := pg_try_advisory_lock(u);
  -- A lock's exclusive request holds or waits for the lock id: a shared try fails.
  -- Requests of the semaphore never hold it exclusive while another request is in.
  IF NOT pg_try_advisory_lock_shared(lock_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
      MESSAGE = 'the name is a lock in use: a lock and a semaphore of one name refuse each other';
  END IF;
  IF alone THEN
    -- Nobody else is in: all N permits are free. A lock's shared holder holds the lock
    -- id too, and so does, for a moment, a request of the semaphore that is letting go
    -- of its keys (pg_advisory_unlock_all() and a session's end free them in no
    -- particular order): the exclusive try is given 20 ms.
    FOR attempt IN 1 .. 20 LOOP
      EXIT WHEN pg_try_advisory_lock(lock_id);
      IF attempt = 20 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
          MESSAGE = 'the name is a lock in use: a lock and a semaphore of one name refuse each other';
      END IF;
      PERFORM pg_sleep(0.001);
    END LOOP;
    PERFORM pg_advisory_unlock(lock_id);
  ELSE
    -- The turnstile: PostgreSQL's FIFO queue. Its holder is the head of the semaphore's
    -- queue and the only one that grants, so nobody passes it.
    IF NOT wait THEN
      IF NOT pg_try_advisory_lock(base) THEN
        PERFORM pg_advisory_unlock_all();
        RETURN NULL;
      END IF;
    ELSE
      PERFORM set_config('lock_timeout', wait_ms::text, true);
      PERFORM pg_advisory_lock(base);
    END IF;
    LOOP
      IF pg_try_advisory_lock(u) THEN
        -- Everyone else left: all N are free.
        PERFORM pg_advisory_unlock(u);
        EXIT;
      END IF;
      -- Permits held: the k of every session of this semaphore that holds a grant's
      -- marker (exclusive, one each), and the oldest grant's marker. A marker held
      -- shared is no grant: the wait below takes one so, and can keep it (there).
      WITH a AS MATERIALIZED (
        SELECT l.pid, l.mode, (l.classid::bigint << 32) | l.objid::bigint AS key
          FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
      SELECT coalesce(sum(r.key - base - 1048576), 0), max(m.key),
             (array_agg(r.key - base - 1048576 ORDER BY m.key DESC))[1]
        INTO held, oldest, oldest_permits
        FROM a r JOIN a m ON m.pid = r.pid AND m.key < 0 AND m.mode = 'ExclusiveLock'
       WHERE r.key BETWEEN base + 1048577 AND base + 2097150;
      EXIT WHEN held + permits <= capacity;
      IF NOT wait THEN
        PERFORM pg_advisory_unlock_all();
        RETURN NULL;
      END IF;
      IF wait_ms > 0 AND clock_timestamp() >= deadline THEN
        RAISE EXCEPTION USING ERRCODE = 'lock_not_available',
          MESSAGE = 'the semaphore''s permits did not come free in time';
      END IF;
      -- Wait for the oldest grant's marker, for at most the pause: its release (or its
      -- session's end) wakes this one at once, any other is seen at the next count.
      -- Taken shared, only to learn that it is free, and let go at once: a grant's
      -- marker is the exclusive one (check and inspect look at that mode only).
      PERFORM set_config('lock_timeout', greatest(1, ceil(1000 * CASE WHEN wait_ms > 0
          THEN least(pause, extract(epoch FROM deadline - clock_timestamp())) ELSE pause END))::text,
          true);
      BEGIN
        PERFORM pg_advisory_lock_shared(oldest);
        PERFORM pg_advisory_unlock_shared(oldest);
        -- Gone, and nobody else granted meanwhile (only this head grants): its permits
        -- are free, no need to count again.
        held := held - oldest_permits;
      EXCEPTION WHEN lock_not_available THEN
        -- The timeout can land just as the lock is granted, and a session lock outlives
        -- the subtransaction the timeout aborted: let go of a hold it left.
        IF EXISTS (SELECT 1 FROM pg_locks l
                    WHERE l.pid = pg_backend_pid() AND l.locktype = 'advisory'
                      AND l.objsubid = 1 AND l.granted AND l.mode = 'ShareLock'
                      AND (l.classid::bigint << 32) | l.objid::bigint = oldest) THEN
          PERFORM pg_advisory_unlock_shared(oldest);
        END IF;
      END;
      EXIT WHEN held + permits <= capacity;
      pause := least(pause * 2, 0.05);
    END LOOP;
  END IF;
  token := nextval('@S.tokens');
  PERFORM pg_advisory_lock(-token);
  -- Counted from here on by whoever grants next: let the next one in.
  IF alone THEN PERFORM pg_advisory_unlock(u);
  ELSE PERFORM pg_advisory_unlock(base); END IF;
  PERFORM set_config('idle_session_timeout', ttl_ms::text, false);
  RETURN token;
END $warden$;
)sql";

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
  // Quiet: an upgrade's "already exists, skipping" notices would reach the user's stderr.
  return "BEGIN;"
         "SET LOCAL client_min_messages = warning;"
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
         "$warden$;" +
         in_schema(kPrimitivesSql, q) + "COMMIT;";
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

std::string lock_id_sql(const std::string& schema) {
  const std::string q = quoted(schema);
  // The row, or the one this statement inserts. A row another session inserted since
  // this statement's snapshot makes the insert do nothing and the answer empty: the next
  // statement's snapshot sees it.
  return "WITH f AS (SELECT id FROM " + q +
         ".locks WHERE grp = $1 AND name = $2::bytea), "
         "i AS (INSERT INTO " + q +
         ".locks (grp, name) SELECT $1, $2::bytea WHERE NOT EXISTS (SELECT 1 FROM f) "
         "ON CONFLICT (grp, name) DO NOTHING RETURNING id) "
         "SELECT id FROM f UNION ALL SELECT id FROM i";
}

std::vector<Param> lock_id_params(const core::LockKey& key) {
  return {Param::text(key.group), Param::binary(key.name)};
}

std::optional<std::int64_t> lock_id_of(const Reply& reply, const core::LockKey& key) {
  if (!reply.ok()) throw_reply(reply, "adding " + key.joined() + " to the lock registry");
  if (reply.rows() == 1) return reply.integer(0, 0);
  return std::nullopt;
}

std::int64_t lock_id(PgConnection& conn, const std::string& schema, const core::LockKey& key,
                     const QueryLimits& limits) {
  const std::string sql = lock_id_sql(schema);
  for (int attempt = 0; attempt < kLockIdAttempts; ++attempt) {
    if (const auto id = lock_id_of(conn.query(sql, lock_id_params(key), limits), key)) return *id;
  }
  throw lock_id_missing(key);
}

Error lock_id_missing(const core::LockKey& key) {
  return Error(Errc::internal,
               "postgres://: " + key.joined() + " is neither in the registry nor can it be added");
}

std::string set_permits_sql(const std::string& schema) {
  return "SELECT " + quoted(schema) + ".set_permits($1::bigint, $2::integer)";
}

std::vector<Param> set_permits_params(std::int64_t id, std::uint32_t permits) {
  return {Param::text(std::to_string(id)), Param::text(std::to_string(permits))};
}

bool permits_set(const Reply& reply) {
  if (!reply.ok()) throw_reply(reply, "opening a semaphore in the lock registry");
  return reply.text(0, 0) == "t";
}

bool set_permits(PgConnection& conn, const std::string& schema, std::int64_t id,
                 std::uint32_t permits, const QueryLimits& limits) {
  return permits_set(conn.query(set_permits_sql(schema), set_permits_params(id, permits), limits));
}

}  // namespace warden::engines::postgres
