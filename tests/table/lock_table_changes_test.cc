// tests/table/lock_table_changes_test.cc — change recording, which a wardend cell's
// leader relies on to send every member what it holds: each key whose holders, lease
// lengths, values or lock-delay changed is noted, and a replica kept from the notes
// alone holds what the table holds after any sequence of calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "table/lock_table.h"
#include "table_test_util.h"

namespace warden::table {
namespace {

using testing::at;
using testing::R;

std::set<std::string> changed(LockTable& table) {
  const auto keys = table.take_changed_keys();
  return {keys.begin(), keys.end()};
}

TEST(LockTableChanges, NothingIsRecordedUnlessAsked) {
  LockTable table;
  const auto g = table.acquire(R::exclusive("a"), at(0));
  ASSERT_EQ(g.status, AcquireStatus::granted);
  EXPECT_TRUE(table.take_changed_keys().empty());
}

TEST(LockTableChanges, EveryChangeOfWhatIsHeldIsNotedAndWaitingAloneIsNot) {
  LockTable table;
  table.record_changes(true);
  const Grant a = table.acquire(R::exclusive("a").ttl(100).lock_delay(50), at(0)).grant;
  EXPECT_EQ(changed(table), std::set<std::string>{"a"});

  // A request that only queues holds nothing yet.
  const auto queued = table.acquire(R::exclusive("a").ttl(100), at(1));
  ASSERT_EQ(queued.status, AcquireStatus::queued);
  EXPECT_TRUE(changed(table).empty());
  ASSERT_TRUE(table.cancel(queued.id, at(2)));
  EXPECT_TRUE(changed(table).empty());

  // A renew, whatever its length (its answer must be one the replicas have confirmed).
  ASSERT_TRUE(table.renew("a", a.token, milliseconds(100), at(3)));
  EXPECT_EQ(changed(table), std::set<std::string>{"a"});
  ASSERT_TRUE(table.renew("a", a.token, milliseconds(200), at(4)));
  EXPECT_EQ(changed(table), std::set<std::string>{"a"});

  ASSERT_TRUE(table.set_value("a", a.token, "v"));
  EXPECT_EQ(changed(table), std::set<std::string>{"a"});

  // The lease expires (a lock-delay starts), then the lock-delay ends.
  table.advance(at(220));
  EXPECT_EQ(changed(table), std::set<std::string>{"a"});
  table.advance(at(400));
  EXPECT_EQ(changed(table), std::set<std::string>{"a"});

  // A release that grants the waiter behind it; restored grants and lock-delays.
  const Grant b = table.acquire(R::exclusive("b"), at(500)).grant;
  ASSERT_EQ(table.acquire(R::exclusive("b"), at(500)).status, AcquireStatus::queued);
  changed(table);
  ASSERT_TRUE(table.release("b", b.token, at(501)));
  EXPECT_EQ(changed(table), std::set<std::string>{"b"});
  ASSERT_TRUE(table.restore(R::exclusive("c"), 1, at(502)));
  ASSERT_TRUE(table.restore_delay("d", at(600), at(502)));
  EXPECT_EQ(changed(table), (std::set<std::string>{"c", "d"}));

  table.record_changes(false);
  ASSERT_TRUE(table.restore_delay("e", at(600), at(503)));
  EXPECT_TRUE(table.take_changed_keys().empty());
}

// What a replica keeps of a key: its holders' tokens, lease lengths, lock-delays,
// permits and values, and whether a lock-delay runs.
struct Held {
  std::vector<std::tuple<std::uint64_t, std::int64_t, std::int64_t, std::uint32_t, std::string>>
      holders;
  bool delayed = false;
  friend bool operator==(const Held&, const Held&) = default;
};

Held held_of(const LockTable& table, const std::string& key, Time now) {
  const KeyInfo info = table.inspect(key);
  Held out;
  for (const HolderInfo& h : info.holders) {
    out.holders.emplace_back(h.token, h.ttl.count(), h.lock_delay.count(), h.permits, h.value);
  }
  std::sort(out.holders.begin(), out.holders.end());
  out.delayed = info.delayed_until.has_value() && *info.delayed_until > now;
  return out;
}

// Random calls on a few keys; after each, the replica takes the keys noted, and must then
// hold what the table holds on every key.
TEST(LockTableChanges, AReplicaKeptFromTheNotesHoldsWhatTheTableHolds) {
  const std::vector<std::string> keys = {"k/a", "k/b", "k/c", "k/sem"};
  std::mt19937_64 random(0x5eed);
  for (int run = 0; run < 20; ++run) {
    LockTable table;
    table.record_changes(true);
    std::map<std::string, Held> replica;
    std::int64_t ms = 0;
    std::vector<std::pair<std::string, std::uint64_t>> granted;
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(random() % n); };
    for (int step = 0; step < 400; ++step) {
      const std::string& key = keys[pick(keys.size())];
      const bool semaphore = key == "k/sem";
      switch (pick(7)) {
        case 0:
        case 1: {
          R r = semaphore ? R::permits(1 + static_cast<std::uint32_t>(pick(2)), 3, key)
                          : (pick(2) ? R::exclusive(key) : R::shared(key));
          r.ttl(10 + static_cast<std::int64_t>(pick(50))).lock_delay(pick(2) ? 20 : 0);
          if (pick(3) == 0) r.value("v" + std::to_string(step));
          r.until(pick(2) ? at(ms) : at(ms + 30));
          const auto res = table.acquire(r, at(ms));
          if (res.status == AcquireStatus::granted) granted.emplace_back(key, res.grant.token);
          break;
        }
        case 2:
          if (!granted.empty()) {
            const auto& [k, token] = granted[pick(granted.size())];
            table.release(k, token, at(ms));
          }
          break;
        case 3:
          if (!granted.empty()) {
            const auto& [k, token] = granted[pick(granted.size())];
            table.renew(k, token, milliseconds(10 + static_cast<std::int64_t>(pick(3)) * 20),
                        at(ms));
          }
          break;
        case 4:
          if (!granted.empty()) {
            const auto& [k, token] = granted[pick(granted.size())];
            table.set_value(k, token, pick(2) ? "" : "w" + std::to_string(step));
          }
          break;
        case 5: {
          SetRequest set;
          set.members = {{"k/a", Mode::exclusive}, {"k/b", Mode::shared}};
          set.ttl = milliseconds(40);
          set.deadline = at(ms + 20);
          table.acquire_set(set, at(ms));
          break;
        }
        default:
          ms += static_cast<std::int64_t>(pick(25));
          table.advance(at(ms));
      }
      for (const Event& e : table.take_events()) {
        if (e.kind == Event::Kind::granted) granted.emplace_back(e.grant.key, e.grant.token);
        for (const Grant& g : e.grants) granted.emplace_back(g.key, g.token);
      }
      for (const std::string& k : table.take_changed_keys()) replica[k] = held_of(table, k, at(ms));
      for (const std::string& k : keys) {
        Held expected = held_of(table, k, at(ms));
        Held kept = replica.count(k) ? replica[k] : Held{};
        // A lock-delay that ended by the clock alone is noted when the table applies the
        // time; until then both say it runs or neither does.
        ASSERT_EQ(kept, expected) << "run " << run << " step " << step << " key " << k;
      }
    }
  }
}

}  // namespace
}  // namespace warden::table
