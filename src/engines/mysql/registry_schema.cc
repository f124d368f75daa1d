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
  const auto sets = connection.query(
      "SELECT GET_LOCK(" + guard + ", " + seconds +
          "), (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
          "AND TABLE_NAME = 'warden_locks'), (SELECT COUNT(*) FROM information_schema.TABLES "
          "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'warden_fences'), (SELECT COUNT(*) "
          "FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND "
          "ROUTINE_NAME = 'warden_fence')",
      deadline(), "look for the registry");
  if (sets.size() != 1 || sets[0].size() != 1 || sets[0][0].size() != 4) {
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
  connection.query("DO RELEASE_LOCK(" + guard + ")", deadline(), "release the install lock");
}

}  // namespace warden::engines::mysql
