#include "engines/mysql/registry_schema.h"

#include <string>

#include "warden/error.h"

namespace warden::engines::mysql {
namespace {

constexpr const char* kLocksTable = R"(CREATE TABLE IF NOT EXISTS warden_locks (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  grp VARBINARY(64) NOT NULL,
  name VARBINARY(512) NOT NULL,
  UNIQUE KEY grp_name (grp, name)
) ENGINE=InnoDB)";

// Tokens. NEXTVAL hands values out in order to every session (the cache is the
// server's, not a session's), and it writes the table only once per kTokenCache values.
// That write is durable only once a later commit flushes the redo log, which the engine
// forces before it tells a token beyond what it knows to be durable (kSyncTable).
const std::string kTokenSequence =
    "CREATE SEQUENCE IF NOT EXISTS warden_tokens START WITH 1 CACHE " +
    std::to_string(kTokenCache) + " NOCYCLE ENGINE=InnoDB";

// One row, upserted to commit: a commit flushes the redo log up to itself
// (innodb_flush_log_at_trx_commit=1), so every earlier sequence write with it.
constexpr const char* kSyncTable = R"(CREATE TABLE IF NOT EXISTS warden_token_sync (
  k TINYINT UNSIGNED NOT NULL PRIMARY KEY,
  n BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB)";

// Which session held each lock with which token when a holder's first renewal wrote
// it: a hint for status, which believes it only while the lock's token lock
// ("NAME/TOKEN") is held by the session holding the lock. In memory: a restart empties
// it with the locks. The session's max_heap_table_size at creation caps it; the install
// raises that to 1 GiB (tens of millions of locks; rows take memory only once written).
constexpr const char* kHoldersTable = R"(CREATE TABLE IF NOT EXISTS warden_holders (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  holder BIGINT UNSIGNED NOT NULL,
  token BIGINT UNSIGNED NOT NULL
) ENGINE=MEMORY)";

// A grant in one statement: GET_LOCK, and only if it granted, the next token and the
// token lock "NAME/TOKEN" beside it. Returns the token, 0 for a wait that timed out,
// NULL for a killed one, and kIsSemaphore (the lock released again) when the name is a
// semaphore in use. A function's body is parsed once per session, where the same
// expression sent as text was parsed at every grant.
//
// The semaphore test reads warden_semaphores after GET_LOCK granted: a semaphore writes
// (and commits) its row before its head takes the turnstile and looks at this lock, so
// one of the two always sees the other (docs/engines/mysql.md, Semaphores). The
// turnstile is tested before the slots: a head releases it only once it holds its slots.
// A name never used as a semaphore costs one primary-key read that finds nothing.
constexpr const char* kGrantFunction =
    R"(CREATE OR REPLACE FUNCTION warden_grant(p_name VARCHAR(64) CHARACTER SET ascii,
                                      p_wait DOUBLE)
RETURNS BIGINT UNSIGNED NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
  DECLARE got INT DEFAULT GET_LOCK(p_name, p_wait);
  DECLARE slots INT UNSIGNED;
  DECLARE i INT UNSIGNED DEFAULT 0;
  IF got IS NULL THEN RETURN NULL; END IF;
  IF got = 0 THEN RETURN 0; END IF;
  SET slots = (SELECT capacity FROM warden_semaphores
               WHERE id = CAST(SUBSTRING_INDEX(p_name, ':', -1) AS UNSIGNED));
  IF slots IS NOT NULL THEN
    IF IS_FREE_LOCK(CONCAT(p_name, '/t')) = 0 THEN
      DO RELEASE_LOCK(p_name);
      RETURN 18446744073709551615;
    END IF;
    WHILE i < slots DO
      IF IS_FREE_LOCK(CONCAT(p_name, '/s', i)) = 0 THEN
        DO RELEASE_LOCK(p_name);
        RETURN 18446744073709551615;
      END IF;
      SET i = i + 1;
    END WHILE;
  END IF;
  IF GET_LOCK(CONCAT(p_name, '/', NEXTVAL(warden_tokens)), 0) = 1 THEN
    RETURN LASTVAL(warden_tokens);
  END IF;
  RETURN NULL;
END)";

// A semaphore's permits in use, and the last N each semaphore was opened with (InnoDB:
// the plain grant reads it, and its row must be committed before the semaphore's head
// looks at the lock). A row outlives its semaphore; it is only a claim while a slot or
// the turnstile is held.
constexpr const char* kSemaphoresTable = R"(CREATE TABLE IF NOT EXISTS warden_semaphores (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  capacity INT UNSIGNED NOT NULL
) ENGINE=InnoDB)";

// k permits of N in one statement. FIFO through the turnstile "NAME/t" (GET_LOCK queues
// its waiters in arrival order); its holder, the head, refuses if the plain lock is held
// (-1) or the semaphore's stored N is not p_of (-2), and otherwise takes free slots
// "NAME/s<i>", i < N, with GET_LOCK(…, 0) until it has k. While it has fewer it waits on
// one slot it lacks (round robin) with a short growing timeout, and looks at all again:
// it keeps what it took, so nobody behind it passes it. Then the token and its token
// lock, and the turnstile goes to the next. A wait that runs out releases everything
// (0); a killed one returns NULL (the engine then closes the session).
constexpr const char* kTakeFunction =
    R"(CREATE OR REPLACE FUNCTION warden_take(p_name VARCHAR(64) CHARACTER SET ascii,
                                     p_permits INT UNSIGNED, p_of INT UNSIGNED,
                                     p_wait DOUBLE)
RETURNS BIGINT NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
  DECLARE stop_at DOUBLE DEFAULT UNIX_TIMESTAMP(SYSDATE(6)) + p_wait;
  DECLARE got INT DEFAULT GET_LOCK(CONCAT(p_name, '/t'), p_wait);
  DECLARE have INT UNSIGNED DEFAULT 0;
  DECLARE i INT UNSIGNED;
  DECLARE next_probe INT UNSIGNED DEFAULT 0;
  DECLARE pause DOUBLE DEFAULT 0.001;
  DECLARE left_s DOUBLE;
  DECLARE token BIGINT UNSIGNED;
  IF got IS NULL THEN RETURN NULL; END IF;
  IF got = 0 THEN RETURN 0; END IF;
  IF IS_FREE_LOCK(p_name) = 0 THEN DO RELEASE_ALL_LOCKS(); RETURN -1; END IF;
  IF NOT ((SELECT capacity FROM warden_semaphores
           WHERE id = CAST(SUBSTRING_INDEX(p_name, ':', -1) AS UNSIGNED)) <=> p_of) THEN
    DO RELEASE_ALL_LOCKS();
    RETURN -2;
  END IF;
  take: LOOP
    SET i = 0;
    WHILE have < p_permits AND i < p_of DO
      IF IS_FREE_LOCK(CONCAT(p_name, '/s', i)) = 1 THEN
        IF GET_LOCK(CONCAT(p_name, '/s', i), 0) = 1 THEN SET have = have + 1; END IF;
      END IF;
      SET i = i + 1;
    END WHILE;
    IF have >= p_permits THEN LEAVE take; END IF;
    SET left_s = stop_at - UNIX_TIMESTAMP(SYSDATE(6));
    IF left_s <= 0 THEN DO RELEASE_ALL_LOCKS(); RETURN 0; END IF;
    -- Wait on a slot someone else holds: it is ours the moment it is released.
    SET i = 0;
    WHILE i < p_of AND IS_USED_LOCK(CONCAT(p_name, '/s', (next_probe + i) % p_of))
                       <=> CONNECTION_ID() DO
      SET i = i + 1;
    END WHILE;
    SET i = (next_probe + i) % p_of;
    SET next_probe = i + 1;
    SET got = GET_LOCK(CONCAT(p_name, '/s', i), LEAST(pause, left_s));
    IF got IS NULL THEN DO RELEASE_ALL_LOCKS(); RETURN NULL; END IF;
    IF got = 1 THEN SET have = have + 1; END IF;
    SET pause = LEAST(pause * 2, 0.02);
  END LOOP;
  SET token = NEXTVAL(warden_tokens);
  IF GET_LOCK(CONCAT(p_name, '/', token), 0) = 1 THEN
    DO RELEASE_LOCK(CONCAT(p_name, '/t'));
    RETURN token;
  END IF;
  DO RELEASE_ALL_LOCKS();
  RETURN NULL;
END)";

// An election's leader value: the row of the lock's id, with the token (term) of the
// grant that wrote it. Written by the grant's own session, right after the grant in the
// same round trip, and by proclaim, guarded by that session holding the lock and the
// token lock. Status believes a row only while the lock's holder holds its token lock.
constexpr const char* kLeadersTable = R"(CREATE TABLE IF NOT EXISTS warden_leaders (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  token BIGINT UNSIGNED NOT NULL,
  value BLOB NOT NULL
) ENGINE=InnoDB)";

constexpr const char* kFencesTable = R"(CREATE TABLE IF NOT EXISTS warden_fences (
  grp VARBINARY(64) NOT NULL,
  name VARBINARY(512) NOT NULL,
  token BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (grp, name)
) ENGINE=InnoDB)";

// The upsert takes the row's lock until the caller's transaction ends, so fenced writes
// to one lock's resource serialize, and a lower token can never slip in between.
constexpr const char* kFenceFunction =
    R"(CREATE FUNCTION warden_fence(p_grp VARBINARY(64), p_name VARBINARY(512),
                             p_token BIGINT UNSIGNED)
RETURNS BOOLEAN NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
  DECLARE highest BIGINT UNSIGNED;
  INSERT INTO warden_fences (grp, name, token) VALUES (p_grp, p_name, p_token)
    ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token));
  SELECT token INTO highest FROM warden_fences WHERE grp = p_grp AND name = p_name;
  RETURN highest = p_token;
END)";

bool as_bool(const Field& field) { return field && *field != "0"; }

}  // namespace

void install_registry(Connection& connection, const MysqlConfig& config) {
  const auto deadline = [&] { return Clock::now() + config.op_timeout; };
  const std::string guard = "'" + config.lock_prefix() + "install'";
  const auto seconds = std::to_string((config.op_timeout.count() + 999) / 1000);
  const auto table = [](const char* name) {
    return std::string(
               "(SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
               "AND TABLE_NAME = '") +
           name + "')";
  };
  const auto sets = connection.query(
      "SELECT GET_LOCK(" + guard + ", " + seconds + "), " + table("warden_locks") + ", " +
          table("warden_fences") +
          ", (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = "
          "DATABASE() AND ROUTINE_NAME = 'warden_fence'), " +
          table("warden_tokens") + ", " + table("warden_token_sync") + ", " +
          table("warden_holders") +
          // warden_grant as it is now: one that knows semaphores (an older one is replaced).
          ", (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = "
          "DATABASE() AND ROUTINE_NAME = 'warden_grant' AND (ROUTINE_DEFINITION IS NULL OR "
          "ROUTINE_DEFINITION LIKE '%warden_semaphores%')), VERSION(), " +
          table("warden_semaphores") + ", " + table("warden_leaders") +
          ", (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = "
          "DATABASE() AND ROUTINE_NAME = 'warden_take')",
      deadline(), "look for the registry");
  if (sets.size() != 1 || sets[0].size() != 1 || sets[0][0].size() != 12) {
    throw Error(Errc::internal, "mysql: unexpected reply while looking for the registry");
  }
  const Row& row = sets[0][0];
  if (!as_bool(row[0])) {
    throw Error(Errc::deadline_exceeded, "mysql: another client kept the registry's install lock " +
                                             guard + " for " + seconds + " s");
  }
  // Sequences (10.3) and RELEASE_ALL_LOCKS (10.5) are MariaDB's; MySQL has neither.
  const std::string version = row[8].value_or("");
  if (version.find("MariaDB") == std::string::npos) {
    connection.query("DO RELEASE_LOCK(" + guard + ")", deadline(), "release the install lock");
    throw Error(Errc::unsupported, "mysql: the server is '" + version +
                                       "'; mysql:// needs MariaDB 10.5 or later (it draws "
                                       "tokens from a SEQUENCE, which MySQL lacks)");
  }
  const auto create = [&](bool exists, const std::string& sql, const std::string& what,
                          const char* privilege) {
    if (exists) return;
    try {
      connection.query(sql, deadline(), "create " + what);
    } catch (const Error& e) {
      if (e.code() != Errc::permission_denied) throw;
      throw Error(Errc::permission_denied,
                  std::string(e.what()) + " — warden needs the " + privilege +
                      " privilege on database '" + config.database + "' once, to create " + what +
                      " (or an administrator creates it: docs/engines/mysql.md)");
    }
  };
  create(as_bool(row[1]), kLocksTable, "the registry table warden_locks", "CREATE");
  create(as_bool(row[2]), kFencesTable, "the table warden_fences", "CREATE");
  create(as_bool(row[3]), kFenceFunction, "the stored function warden_fence()", "CREATE ROUTINE");
  create(as_bool(row[4]), kTokenSequence, "the sequence warden_tokens", "CREATE");
  create(as_bool(row[5]), kSyncTable, "the table warden_token_sync", "CREATE");
  create(as_bool(row[9]), kSemaphoresTable, "the table warden_semaphores", "CREATE");
  create(as_bool(row[10]), kLeadersTable, "the table warden_leaders", "CREATE");
  create(as_bool(row[7]), kGrantFunction, "the stored function warden_grant()", "CREATE ROUTINE");
  create(as_bool(row[11]), kTakeFunction, "the stored function warden_take()", "CREATE ROUTINE");
  if (!as_bool(row[6])) {
    connection.query("SET SESSION max_heap_table_size = 1073741824", deadline(),
                     "size the holders table");
    create(false, kHoldersTable, "the table warden_holders", "CREATE");
  }
  connection.query("DO RELEASE_LOCK(" + guard + ")", deadline(), "release the install lock");
}

}  // namespace warden::engines::mysql
