// Status of mysql:// locks, read without changing anything: holders from IS_USED_LOCK
// and warden_holders, waiters from the sessions the server shows waiting in GET_LOCK
// on the lock's name (information_schema.PROCESSLIST, state "User lock"; a user without
// the PROCESS privilege sees its own sessions only).
#include <charconv>
#include <cstdint>
#include <string>

#include "engines/mysql/connection.h"
#include "engines/mysql/mysql_engine.h"
#include "engines/mysql/pool.h"
#include "warden/error.h"

namespace warden::engines::mysql {
namespace {

constexpr int kPage = 500;

std::uint64_t number(const Field& field) {
  std::uint64_t value = 0;
  if (field) std::from_chars(field->data(), field->data() + field->size(), value);
  return value;
}

// SQL for: the lock row's name on the server, whether it is held, by whom, the token,
// and how many sessions wait for it.
std::string columns(const std::string& prefix) {
  const std::string lock = "CONCAT('" + prefix + "', l.id)";
  return "l.name, IS_USED_LOCK(" + lock +
         "), h.holder, h.token, (SELECT COUNT(*) FROM "
         "information_schema.PROCESSLIST p WHERE p.STATE = 'User lock' AND LOCATE(CONCAT("
         "'GET_LOCK(''', " +
         lock + ", ''''), p.INFO) > 0)";
}

}  // namespace

LockStatus inspect_on(Pool& pool, const core::LockKey& key) {
  const auto& config = pool.config();
  LockStatus status;
  status.group = key.group;
  status.name = key.name;
  const auto sets = pool.with([&](Connection& c) {
    return c.query(
        "SELECT " + columns(config.lock_prefix()) +
            " FROM warden_locks l LEFT JOIN warden_holders h ON h.id = l.id WHERE l.grp = " +
            hex_literal(key.group) + " AND l.name = " + hex_literal(key.name),
        Clock::now() + config.op_timeout, "inspect " + key.joined());
  });
  if (sets.size() != 1 || sets[0].empty()) return status;  // never used: free
  const Row& row = sets[0][0];
  if (row.size() != 5) throw Error(Errc::internal, "mysql: unexpected reply to inspect");
  if (row[1]) {
    // Held. The token is the holders row's, written in the grant's own round trip.
    status.holders.push_back(HolderStatus{Mode::exclusive, number(row[3]), std::nullopt});
  }
  const std::uint64_t waiting = number(row[4]);
  for (std::uint64_t i = 0; i < waiting; ++i) {
    status.waiters.push_back(WaiterStatus{Mode::exclusive, std::nullopt});
  }
  return status;
}

std::vector<LockSummary> list_on(Pool& pool, std::string_view group) {
  const auto& config = pool.config();
  std::vector<LockSummary> out;
  std::optional<std::string> after;
  while (true) {
    const std::string sql = "SELECT " + columns(config.lock_prefix()) +
                            " FROM warden_locks l LEFT JOIN warden_holders h ON h.id = l.id "
                            "WHERE l.grp = " +
                            hex_literal(group) +
                            (after ? " AND l.name > " + hex_literal(*after) : std::string()) +
                            " ORDER BY l.name LIMIT " + std::to_string(kPage);
    const auto sets = pool.with([&](Connection& c) {
      return c.query(sql, Clock::now() + config.op_timeout,
                     "list group '" + std::string(group) + "'");
    });
    if (sets.size() != 1) throw Error(Errc::internal, "mysql: unexpected reply to list");
    for (const Row& row : sets[0]) {
      if (row.size() != 5 || !row[0]) throw Error(Errc::internal, "mysql: unexpected list row");
      const std::size_t holders = row[1] ? 1 : 0;
      const auto waiters = static_cast<std::size_t>(number(row[4]));
      if (holders + waiters > 0) out.push_back(LockSummary{*row[0], holders, waiters});
      after = *row[0];
    }
    if (sets[0].size() < static_cast<std::size_t>(kPage)) return out;
  }
}

}  // namespace warden::engines::mysql
