// Status of mysql:// locks, read without changing anything: holders from IS_USED_LOCK,
// waiters from the sessions the server shows waiting in GET_LOCK on the lock's name
// (information_schema.PROCESSLIST, state "User lock", statement warden_grant('NAME', …);
// a user without the PROCESS privilege sees its own sessions only).
//
// A holder's token is the one whose token lock "NAME/TOKEN" the holding session holds.
// GET_LOCK locks cannot be listed, only tested by name, so the token is found from a
// guess that is then tested: the lock's warden_holders row (written at a grant's first
// renewal), else every value the sequence may have handed out since that row, newest
// first, up to kSearched of them.
#include <algorithm>
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
// Tokens tested for a holder whose holders row is missing or stale: grants younger than
// their first renewal, on a server that handed out fewer than this many tokens since.
constexpr std::uint64_t kSearched = 200000;

std::uint64_t number(const Field& field) {
  std::uint64_t value = 0;
  if (field) std::from_chars(field->data(), field->data() + field->size(), value);
  return value;
}

// SQL for: the lock's name, the session holding it, its holders row's token, the session
// holding that token's lock, the sequence's stored bound (above every token handed
// out), how many sessions wait for the lock, and its id.
std::string columns(const std::string& prefix) {
  const std::string lock = "CONCAT('" + prefix + "', l.id)";
  return "l.name, IS_USED_LOCK(" + lock + "), h.token, IS_USED_LOCK(CONCAT(" + lock +
         ", '/', h.token)), (SELECT next_not_cached_value FROM warden_tokens), "
         "(SELECT COUNT(*) FROM information_schema.PROCESSLIST p WHERE p.STATE = 'User lock' "
         "AND LOCATE(CONCAT('warden_grant(''', " +
         lock + ", ''','), p.INFO) > 0), l.id";
}

// The token of session `holder`'s grant of the lock named `lock` on the server: the one
// whose token lock it holds, searched from just below `bound` down to just above
// `floor`; 0 if not found there.
std::uint64_t search_token(Pool& pool, const std::string& lock, const std::string& holder,
                           std::uint64_t floor, std::uint64_t bound) {
  if (bound <= floor + 1) return 0;
  const std::uint64_t top = bound - 1;
  const std::uint64_t span = std::min(top - floor, kSearched);
  const std::string sql = "SELECT " + std::to_string(top) + " - seq FROM seq_0_to_" +
                          std::to_string(span - 1) + " WHERE IS_USED_LOCK(CONCAT('" + lock +
                          "/', " + std::to_string(top) + " - seq)) = " + holder + " LIMIT 1";
  const auto sets = pool.with([&](Connection& c) {
    return c.query(sql, Clock::now() + pool.config().op_timeout, "find a holder's token");
  });
  if (sets.size() != 1 || sets[0].empty() || sets[0][0].size() != 1) return 0;
  return number(sets[0][0][0]);
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
  if (row.size() != 7) throw Error(Errc::internal, "mysql: unexpected reply to inspect");
  if (const Field& holder = row[1]; holder) {
    // The holders row's token if the holding session holds its token lock; else the
    // holder drew a later one (tokens increase per lock), searched above it.
    std::uint64_t token = number(row[2]);
    if (!row[3] || *row[3] != *holder) {
      token = search_token(pool, config.lock_prefix() + row[6].value_or(""), *holder, token,
                           number(row[4]));
    }
    status.holders.push_back(HolderStatus{Mode::exclusive, token, std::nullopt});
  }
  const std::uint64_t waiting = number(row[5]);
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
      if (row.size() != 7 || !row[0]) throw Error(Errc::internal, "mysql: unexpected list row");
      const std::size_t holders = row[1] ? 1 : 0;
      const auto waiters = static_cast<std::size_t>(number(row[5]));
      if (holders + waiters > 0) out.push_back(LockSummary{*row[0], holders, waiters});
      after = *row[0];
    }
    if (sets[0].size() < static_cast<std::size_t>(kPage)) return out;
  }
}

}  // namespace warden::engines::mysql
