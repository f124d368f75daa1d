#include "engines/mysql/registry_schema.h"

#include <string>

#include "warden/error.h"

namespace warden::engines::mysql {
namespace {

constexpr const char* kLocksTable = R"(CREATE TABLE IF NOT EXISTS warden_locks (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  grp VARBINARY(64) NOT NULL,
  name VARBINARY(512) NOT NULL,
  token BIGINT UNSIGNED NOT NULL DEFAULT 0,
  holder BIGINT UNSIGNED NOT NULL DEFAULT 0,
  UNIQUE KEY grp_name (grp, name)
) ENGINE=InnoDB)";

// Who holds each lock and with which token, for check and status. It lives in memory,
// like the GET_LOCK locks it describes: a server restart empties both, and writing it
// costs no redo log flush. The session's max_heap_table_size at creation caps it; the
// install raises that to 1 GiB (tens of millions of locks; rows take memory only once
// written).
constexpr const char* kHoldersTable = R"(CREATE TABLE IF NOT EXISTS warden_holders (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  holder BIGINT UNSIGNED NOT NULL,
  token BIGINT UNSIGNED NOT NULL
) ENGINE=MEMORY)";

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

// Tokens are drawn hi/lo. warden_token_ceiling (InnoDB, committed durably) bounds every
// token ever handed out; warden_token_next (MEMORY, shared by every session, emptied by
// a restart) counts v up to `safe`, a copy of the ceiling. The copy is only ever written
// from the committed ceiling, so it never exceeds the durable value, and v never
// passes it. At the copy (or with no row, after a restart: v starts again at the
// ceiling, above every token handed out before) the durable ceiling is first raised by
// kTokenBlock: one redo log flush per kTokenBlock grants.
constexpr const char* kCeilingTable = R"(CREATE TABLE IF NOT EXISTS warden_token_ceiling (
  k TINYINT UNSIGNED NOT NULL PRIMARY KEY,
  ceiling BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB)";

constexpr const char* kNextTable = R"(CREATE TABLE IF NOT EXISTS warden_token_next (
  k TINYINT UNSIGNED NOT NULL PRIMARY KEY,
  v BIGINT UNSIGNED NOT NULL,
  safe BIGINT UNSIGNED NOT NULL
) ENGINE=MEMORY)";

// After GET_LOCK, in the same round trip: p_got is its result. When granted, draws the
// token and records the holder; answers one row (p_got, token or NULL). A procedure's
// statements are parsed once per session, and each locks its tables only while it
// runs.
std::string token_procedure() {
  const std::string block = std::to_string(kTokenBlock);
  return R"(CREATE PROCEDURE warden_token(p_id BIGINT UNSIGNED, p_got INT)
MODIFIES SQL DATA
BEGIN
  DECLARE drawn BIGINT UNSIGNED DEFAULT NULL;
  IF p_got = 1 THEN
    UPDATE warden_token_next SET v = LAST_INSERT_ID(v + 1) WHERE k = 1 AND v < safe;
    WHILE ROW_COUNT() = 0 DO
      IF NOT EXISTS (SELECT 1 FROM warden_token_ceiling WHERE k = 1) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'warden_token_ceiling has no row';
      END IF;
      INSERT IGNORE INTO warden_token_next (k, v, safe)
        SELECT 1, ceiling, ceiling FROM warden_token_ceiling WHERE k = 1;
      UPDATE warden_token_ceiling SET ceiling = GREATEST(ceiling,
        (SELECT v FROM warden_token_next WHERE k = 1) + )" +
         block + R"() WHERE k = 1;
      UPDATE warden_token_next SET safe = GREATEST(safe,
        (SELECT ceiling FROM warden_token_ceiling WHERE k = 1)) WHERE k = 1;
      UPDATE warden_token_next SET v = LAST_INSERT_ID(v + 1) WHERE k = 1 AND v < safe;
    END WHILE;
    SET drawn = LAST_INSERT_ID();
    INSERT INTO warden_holders (id, holder, token) VALUES (p_id, CONNECTION_ID(), drawn)
      ON DUPLICATE KEY UPDATE holder = VALUES(holder), token = VALUES(token);
  END IF;
  SELECT p_got, drawn;
END)";
}

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
          table("warden_token_ceiling") + ", " + table("warden_holders") +
          ", (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = "
          "DATABASE() AND ROUTINE_NAME = 'warden_token'), " +
          table("warden_token_next"),
      deadline(), "look for the registry");
  if (sets.size() != 1 || sets[0].size() != 1 || sets[0][0].size() != 8) {
    throw Error(Errc::internal, "mysql: unexpected reply while looking for the registry");
  }
  const Row& row = sets[0][0];
  if (!as_bool(row[0])) {
    throw Error(Errc::deadline_exceeded, "mysql: another client kept the registry's install lock " +
                                             guard + " for " + seconds + " s");
  }
  const auto create = [&](bool exists, const char* sql, const std::string& what,
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
  if (!as_bool(row[4])) {
    create(false, kCeilingTable, "the table warden_token_ceiling", "CREATE");
    // Above every token the per-lock counters of an older registry handed out, so that
    // tokens keep increasing across the upgrade.
    connection.query(
        "INSERT IGNORE INTO warden_token_ceiling (k, ceiling) SELECT 1, COALESCE(MAX(token), 0) "
        "FROM warden_locks",
        deadline(), "start the token ceiling");
  }
  if (!as_bool(row[7])) create(false, kNextTable, "the table warden_token_next", "CREATE");
  if (!as_bool(row[5])) {
    connection.query("SET SESSION max_heap_table_size = 1073741824", deadline(),
                     "size the holders table");
    create(false, kHoldersTable, "the table warden_holders", "CREATE");
  }
  create(as_bool(row[6]), token_procedure().c_str(), "the stored procedure warden_token()",
         "CREATE ROUTINE");
  connection.query("DO RELEASE_LOCK(" + guard + ")", deadline(), "release the install lock");
}

}  // namespace warden::engines::mysql
