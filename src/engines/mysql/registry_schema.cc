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

// A grant in one statement that opens no table but the sequence: GET_LOCK, and only if
// it granted, the next token and the token lock "NAME/TOKEN" beside it. Returns the
// token, 0 for a wait that timed out, NULL for a killed one. A function's body is parsed
// once per session, where the same expression sent as text was parsed at every grant.
constexpr const char* kGrantFunction =
    R"(CREATE FUNCTION warden_grant(p_name VARCHAR(64) CHARACTER SET ascii, p_wait DOUBLE)
RETURNS BIGINT UNSIGNED NOT DETERMINISTIC MODIFIES SQL DATA
RETURN CASE GET_LOCK(p_name, p_wait)
  WHEN 1 THEN IF(GET_LOCK(CONCAT(p_name, '/', NEXTVAL(warden_tokens)), 0) = 1,
                 LASTVAL(warden_tokens), NULL)
  WHEN 0 THEN 0 END)";

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
          ", (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = "
          "DATABASE() AND ROUTINE_NAME = 'warden_grant'), VERSION()",
      deadline(), "look for the registry");
  if (sets.size() != 1 || sets[0].size() != 1 || sets[0][0].size() != 9) {
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
  create(as_bool(row[7]), kGrantFunction, "the stored function warden_grant()", "CREATE ROUTINE");
  if (!as_bool(row[6])) {
    connection.query("SET SESSION max_heap_table_size = 1073741824", deadline(),
                     "size the holders table");
    create(false, kHoldersTable, "the table warden_holders", "CREATE");
  }
  connection.query("DO RELEASE_LOCK(" + guard + ")", deadline(), "release the install lock");
}

}  // namespace warden::engines::mysql
