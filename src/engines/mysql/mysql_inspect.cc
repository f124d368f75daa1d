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
#include <thread>
#include <vector>

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
// out), how many sessions wait for the lock, and its id; then its leaders row's token,
// the session holding that token's lock, and the row's value; the semaphore's stored N
// and the session holding its turnstile; the session holding the holder's leader mark
// (an election's leader holds its own); how many sessions wait for its permits.
//
// The two kinds of waiters are counted apart: status lists a semaphore's waiters from a
// later read (add_semaphore), and a wait that ends between the two reads must not be
// left over from the first as a lock's waiter.
std::string columns(const std::string& prefix) {
  const std::string lock = "CONCAT('" + prefix + "', l.id)";
  return "l.name, IS_USED_LOCK(" + lock + "), h.token, IS_USED_LOCK(CONCAT(" + lock +
         ", '/', h.token)), (SELECT next_not_cached_value FROM warden_tokens), "
         "(SELECT COUNT(*) FROM information_schema.PROCESSLIST p WHERE p.STATE = 'User lock' "
         "AND LOCATE(CONCAT('warden_grant(''', " +
         lock + ", ''','), p.INFO) > 0), l.id, w.token, IS_USED_LOCK(CONCAT(" + lock +
         ", '/', w.token)), w.value, s.capacity, IS_USED_LOCK(CONCAT(" + lock +
         ", '/t')), IS_USED_LOCK(CONCAT(" + lock + ", '/e', IS_USED_LOCK(" + lock +
         "))), (SELECT COUNT(*) FROM information_schema.PROCESSLIST p WHERE p.COMMAND = "
         "'Query' AND LOCATE(CONCAT('warden_take(''', " +
         lock + ", ''','), p.INFO) > 0 AND (p.STATE = 'User lock' OR p.ID <=> IS_USED_LOCK(CONCAT(" +
         lock + ", '/t'))))";
}

constexpr std::size_t kColumns = 14;

std::string from() {
  return " FROM warden_locks l LEFT JOIN warden_holders h ON h.id = l.id LEFT JOIN "
         "warden_leaders w ON w.id = l.id LEFT JOIN warden_semaphores s ON s.id = l.id";
}

// The token of session `holder`'s grant of the lock named `lock` on the server: the one
// whose token lock it holds, searched from just below `bound` down to just above
// `floor`; 0 if not found there. With `unmarked`, only a token found while that lock
// (the holder's leader mark) is free just before and after: a lock's grant, not a
// campaign's.
std::uint64_t search_token(Pool& pool, const std::string& lock, const std::string& holder,
                           std::uint64_t floor, std::uint64_t bound,
                           const std::string& unmarked = {}) {
  if (bound <= floor + 1) return 0;
  const std::uint64_t top = bound - 1;
  const std::uint64_t span = std::min(top - floor, kSearched);
  const std::string free_mark =
      unmarked.empty() ? std::string() : "IS_USED_LOCK('" + unmarked + "') IS NULL";
  std::string sql = "SELECT " + std::to_string(top) + " - seq FROM seq_0_to_" +
                    std::to_string(span - 1) + " WHERE " +
                    (free_mark.empty() ? "" : free_mark + " AND ") + "IS_USED_LOCK(CONCAT('" +
                    lock + "/', " + std::to_string(top) + " - seq)) = " + holder +
                    (free_mark.empty() ? "" : " AND " + free_mark) + " LIMIT 1";
  const auto sets = pool.with([&](Connection& c) {
    return c.query(sql, Clock::now() + pool.config().op_timeout, "find a holder's token");
  });
  if (sets.size() != 1 || sets[0].empty() || sets[0][0].size() != 1) return 0;
  return number(sets[0][0][0]);
}

// A semaphore's holders (the sessions holding its slots, but its head, which is still
// taking them) with their permits and tokens, and its waiters (sessions running
// warden_take on it: the head first, then by time waited) with theirs.
//
// The head is told apart by what it is doing, not by the turnstile (read before the
// slots, it misses a head that arrives in between). The sessions running warden_take are
// read just after the slots: one still taking then holds slots it was not granted; one
// holding slots and no token lock was never granted them (a head that gave up, even one
// that came and went within the read), and is neither.
//
// A waiter is a session running warden_take that holds the turnstile or waits in GET_LOCK
// (state "User lock"). One that has sent the statement but not yet reached the turnstile
// is not queued: a try arriving meanwhile may still go first, so listing it would tell a
// caller waiting for the queue to form that it had.
void add_semaphore(Pool& pool, const std::string& lock, std::uint32_t capacity, const Field& head,
                   std::uint64_t bound, LockStatus& status) {
  const auto& config = pool.config();
  const std::string taking_sql =
      " FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND LOCATE('warden_take(''" +
      lock + "'',', INFO) > 0";
  const auto sets = pool.with([&](Connection& c) {
    return c.query("SELECT h, COUNT(*) FROM (SELECT IS_USED_LOCK(CONCAT('" + lock +
                       "/s', seq)) AS h FROM seq_0_to_" + std::to_string(capacity - 1) +
                       ") slots WHERE h IS NOT NULL GROUP BY h; SELECT ID, INFO" + taking_sql +
                       " AND (STATE = 'User lock' OR ID <=> IS_USED_LOCK('" + lock +
                       "/t')) ORDER BY ID <=> " + head.value_or("NULL") +
                       " DESC, TIME_MS DESC; SELECT next_not_cached_value FROM warden_tokens",
                   Clock::now() + config.op_timeout, "inspect a semaphore");
  });
  if (sets.size() != 3) throw Error(Errc::internal, "mysql: unexpected reply to inspect");
  const std::string call = "warden_take('" + lock + "', ";
  std::vector<std::string> taking_after;
  for (const Row& row : sets[1]) {
    if (row.size() != 2 || !row[0] || !row[1]) continue;
    const auto at = row[1]->find(call);
    if (at == std::string::npos) continue;
    taking_after.push_back(*row[0]);
    WaiterStatus waiter{Mode::shared, std::nullopt};
    waiter.permits = static_cast<std::uint32_t>(number(Field(row[1]->substr(at + call.size()))));
    status.waiters.push_back(waiter);
  }
  // A grant between the lock's read and this one may have a token above the first bound.
  if (sets[2].size() == 1 && sets[2][0].size() == 1) bound = std::max(bound, number(sets[2][0][0]));
  const auto listed = [](const std::vector<std::string>& ids, const std::string& id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  std::vector<HolderStatus> holders;
  for (const Row& row : sets[0]) {
    if (row.size() != 2 || !row[0] || listed(taking_after, *row[0])) continue;
    HolderStatus holder{Mode::shared, search_token(pool, lock, *row[0], 0, bound), std::nullopt};
    // A holder holds its token lock from its grant to its release: a session without
    // one holds slots it was never granted (a head that gave up, or gave back what it
    // took within this read) or has released them since.
    if (holder.token == 0) continue;
    holder.permits = static_cast<std::uint32_t>(number(row[1]));
    holders.push_back(holder);
  }
  std::sort(holders.begin(), holders.end(),
            [](const HolderStatus& a, const HolderStatus& b) { return a.token < b.token; });
  for (HolderStatus& holder : holders) status.holders.push_back(std::move(holder));
  if (!status.holders.empty() || !status.waiters.empty()) status.permits = capacity;
}

}  // namespace

LockStatus inspect_on(Pool& pool, const core::LockKey& key) {
  const auto& config = pool.config();
  LockStatus status;
  status.group = key.group;
  status.name = key.name;
  // An election's new leader holds the lock a moment before its value row commits (the
  // statement right behind its grant, in the same round trip), and its session holds
  // its leader mark "NAME/e<SESSION>" from before its grant to its release. Statements
  // run in order, so: the holder H; H's mark; the rows; the holder and H's mark again.
  // A row is believed while H holds the token lock of the row's term. Else a holder
  // with its mark before or after is a campaign not committed yet (read again), and one
  // without both times, still holding, is a lock's holder: no value. A holder gone by
  // the end is read again.
  const std::string where =
      " WHERE l.grp = " + hex_literal(key.group) + " AND l.name = " + hex_literal(key.name);
  const auto settle_by = Clock::now() + config.op_timeout;
  Row row;
  HolderStatus shown{Mode::exclusive, 0, std::nullopt};
  Field searched_for;
  for (int attempt = 0;; ++attempt) {
    const auto sets = pool.with([&](Connection& c) {
      return c.query("SET @warden_l = (SELECT CONCAT('" + config.lock_prefix() +
                         "', l.id) FROM warden_locks l" + where +
                         "); SET @warden_h = IS_USED_LOCK(@warden_l); "
                         "SET @warden_m = IS_USED_LOCK(CONCAT(@warden_l, '/e', @warden_h)); "
                         "SELECT " +
                         columns(config.lock_prefix()) + from() + where +
                         "; SELECT @warden_h, @warden_m, IS_USED_LOCK(@warden_l), "
                         "IS_USED_LOCK(CONCAT(@warden_l, '/e', @warden_h))",
                     Clock::now() + config.op_timeout, "inspect " + key.joined());
    });
    if (sets.size() != 2 || sets[1].size() != 1 || sets[1][0].size() != 4) {
      throw Error(Errc::internal, "mysql: unexpected reply to inspect");
    }
    if (sets[0].empty()) return status;  // never used: free
    row = sets[0][0];
    if (row.size() != kColumns) throw Error(Errc::internal, "mysql: unexpected reply to inspect");
    const Row& around = sets[1][0];
    const Field& holder = around[0];
    row[1] = holder;  // H: the holder the rest was read about
    if (!holder) break;
    const bool own_row = row[8] && *row[8] == *holder;
    const bool marked =
        (around[1] && *around[1] == *holder) || (around[3] && *around[3] == *holder);
    const bool still = around[2] && *around[2] == *holder;
    shown = HolderStatus{Mode::exclusive, 0, std::nullopt};
    if (own_row) {
      // The leaders row of the holder's own term: its token and value.
      shown.token = number(row[7]);
      shown.value = row[9].value_or("");
      break;
    }
    if (!marked && still) {
      // A lock's holder. The holders row's token if the holding session holds its token
      // lock; else the holder drew a later one (tokens increase per lock), searched above
      // it, with its leader mark still free.
      const std::string lock = config.lock_prefix() + row[6].value_or("");
      shown.token = number(row[2]);
      if (!row[3] || *row[3] != *holder) {
        shown.token =
            search_token(pool, lock, *holder, shown.token, number(row[4]), lock + "/e" + *holder);
      }
      if (shown.token != 0) break;
      // Not found among the tokens searched, twice for the same holder: shown as 0, not
      // made up (docs/engines/mysql.md, Status).
      if (searched_for == holder) break;
      searched_for = holder;
    }
    if (Clock::now() >= settle_by) {
      throw Error(Errc::deadline_exceeded, "mysql: the holder of " + key.joined() +
                                               " did not settle within " +
                                               std::to_string(config.op_timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(attempt + 1, 10)));
  }
  const std::string lock = config.lock_prefix() + row[6].value_or("");
  const auto plain_waiters = static_cast<std::size_t>(number(row[5]));
  if (row[1]) status.holders.push_back(std::move(shown));
  if (row[10]) {
    add_semaphore(pool, lock, static_cast<std::uint32_t>(number(row[10])), row[11], number(row[4]),
                  status);
  }
  for (std::size_t i = 0; i < plain_waiters; ++i) {
    status.waiters.push_back(WaiterStatus{Mode::exclusive, std::nullopt});
  }
  return status;
}

std::vector<LockSummary> list_on(Pool& pool, std::string_view group) {
  const auto& config = pool.config();
  std::vector<LockSummary> out;
  std::optional<std::string> after;
  while (true) {
    const std::string sql = "SELECT " + columns(config.lock_prefix()) + from() +
                            " WHERE l.grp = " + hex_literal(group) +
                            (after ? " AND l.name > " + hex_literal(*after) : std::string()) +
                            " ORDER BY l.name LIMIT " + std::to_string(kPage);
    const auto sets = pool.with([&](Connection& c) {
      return c.query(sql, Clock::now() + config.op_timeout,
                     "list group '" + std::string(group) + "'");
    });
    if (sets.size() != 1) throw Error(Errc::internal, "mysql: unexpected reply to list");
    for (const Row& row : sets[0]) {
      if (row.size() != kColumns || !row[0])
        throw Error(Errc::internal, "mysql: unexpected list row");
      const std::size_t holders = row[1] ? 1 : 0;
      const auto waiters = static_cast<std::size_t>(number(row[5]) + number(row[13]));
      if (holders + waiters > 0) out.push_back(LockSummary{*row[0], holders, waiters});
      after = *row[0];
    }
    if (sets[0].size() < static_cast<std::size_t>(kPage)) return out;
  }
}

}  // namespace warden::engines::mysql
