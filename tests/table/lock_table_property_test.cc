// tests/table/lock_table_property_test.cc — random call sequences against the reference
// model, plus invariants that hold whatever the model says.
//
// Every sequence is generated from (seed, index) alone, so a failure names both and
// can be rerun on its own:
//   WARDEN_SEED=<seed> WARDEN_TABLE_SEQUENCE=<index> warden_table_tests
//       --gtest_filter='*RandomSequences*'
// (WARDEN_SEED is every randomized test's seed variable; WARDEN_TABLE_SEED, its older
// name here, still works.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "recorded_call.h"
#include "reference_model.h"
#include "table/lock_table.h"
#include "table_test_util.h"

namespace warden::table {
namespace {

using testing::apply;
using testing::at;
using testing::Call;
using testing::describe;
using testing::mode_name;
using testing::ReferenceModel;
using testing::time_text;

constexpr std::uint64_t kDefaultSeed = 0x5eed'1ab1e;
constexpr int kShards = 4;
constexpr std::uint64_t kSequencesPerShard = 2'500;  // 10,000 in all; the slow suite runs more

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::strtoull(v, nullptr, 0);
}

class Sequence {
 public:
  Sequence(std::uint64_t seed, std::uint64_t index)
      : rng_(seed ^ (index * 0x9e37'79b9'7f4a'7c15ULL)), now_(at(0)) {
    int n = 2 + static_cast<int>(pick(2));
    for (int i = 0; i < n; ++i) keys_.push_back(std::string(1, static_cast<char>('a' + i)));
  }

  // Runs the random calls, then drains the table. Stops at the first failed check.
  void run() {
    int calls = 16 + static_cast<int>(pick(25));  // 16..40
    calls_.reserve(static_cast<std::size_t>(calls) + 16);
    for (int i = 0; i < calls && !::testing::Test::HasFailure(); ++i) step();
    if (!::testing::Test::HasFailure()) drain();
  }

  const std::vector<Call>& calls() const { return calls_; }

  // The calls made so far and what a fresh table answers to them.
  std::string log() const {
    LockTable replay;
    std::ostringstream out;
    for (std::size_t i = 0; i < calls_.size(); ++i) {
      out << "  #" << i << " " << describe(calls_[i]) << "  ->  " << apply(replay, calls_[i])
          << "\n";
    }
    return out.str();
  }

 private:
  std::uint64_t pick(std::uint64_t n) { return rng_() % n; }
  bool chance(int percent) { return pick(100) < static_cast<std::uint64_t>(percent); }

  // The `now` of the next call: mostly the current time, sometimes an older one (which
  // the table must treat as the latest it has seen).
  Time call_time() { return chance(10) ? now_ - milliseconds(pick(15)) : now_; }

  void step() {
    std::uint64_t r = pick(100);
    if (r < 35) {
      acquire();
    } else if (r < 45) {
      cancel();
    } else if (r < 50) {
      cancel_session();
    } else if (r < 59) {
      renew();
    } else if (r < 62) {
      renew_burst();
    } else if (r < 77) {
      release();
    } else {
      now_ += milliseconds(chance(15) ? pick(200) : pick(30));
      Call c{Call::Op::advance, call_time()};
      record(c);
      table_.advance(c.now);
      model_.advance(c.now);
      check(c);
    }
  }

  void acquire() {
    Call c{Call::Op::acquire, call_time()};
    Request& q = c.request;
    q.key = keys_[pick(keys_.size())];
    q.mode = chance(50) ? Mode::exclusive : Mode::shared;
    if (chance(20)) {
      // A semaphore's request, of one of two capacities: keys change kind when idle, and
      // a request of the other kind or capacity on a key in use is a mismatch.
      q.capacity = chance(80) ? 3 : 2;
      q.permits = static_cast<std::uint32_t>(chance(5) ? 0 : 1 + pick(q.capacity));
    }
    q.fair = chance(70);
    q.ttl = milliseconds(1 + pick(60));
    q.lock_delay = chance(60) ? milliseconds(0) : milliseconds(1 + pick(40));
    std::uint64_t d = pick(100);
    if (d < 25) {
      q.deadline = now_ - milliseconds(pick(3) == 0 ? 20 : 0);  // try once
    } else if (d < 40) {
      q.deadline = Time::max();
    } else {
      q.deadline = now_ + milliseconds(1 + pick(80));
    }
    q.session = pick(3);
    record(c);
    AcquireResult got = table_.acquire(q, c.now);
    ReferenceModel::Result want = model_.acquire(q, c.now);
    Time now = latest(c.now);
    // The events come from the call's own advance, which happened before this request.
    check_events(table_.take_events());
    EXPECT_EQ(got.status, want.status);
    EXPECT_EQ(got.id, want.id);
    if (got.status == AcquireStatus::granted) {
      EXPECT_EQ(got.grant.expires, want.expires);
      EXPECT_EQ(got.grant.key, q.key);
      EXPECT_EQ(got.grant.mode, q.capacity > 0 ? Mode::shared : q.mode);
      EXPECT_EQ(got.grant.permits, q.capacity > 0 ? q.permits : 0u);
      EXPECT_EQ(got.grant.id, got.id);
      EXPECT_EQ(got.grant.session, q.session);
      EXPECT_GT(got.grant.expires, now);
      note_grant(q.key, got.grant.token, got.id);
    } else if (got.status == AcquireStatus::queued) {
      EXPECT_GT(q.deadline, now) << "a try-once request was queued";
      queued_[q.key].push_back(got.id);
      issued_.push_back(got.id);
    } else {
      EXPECT_EQ(got.id, 0u);
    }
    check(c);
  }

  void cancel() {
    Call c{Call::Op::cancel, call_time()};
    c.id = !issued_.empty() && chance(85) ? issued_[pick(issued_.size())] : 1 + pick(1000);
    record(c);
    bool got = table_.cancel(c.id, c.now);
    bool want = model_.cancel(c.id, c.now);
    EXPECT_EQ(got, want);
    // A request that was still waiting after the call's own advance can only have had
    // requests ahead of it granted by that advance, so it leaves the queue first.
    if (got) {
      for (auto& [key, ids] : queued_) {
        if (std::erase(ids, c.id) > 0) gone_.insert(c.id);
      }
      EXPECT_TRUE(gone_.contains(c.id)) << "cancel() succeeded for a request never queued";
    }
    check(c);
  }

  void cancel_session() {
    // Advance first, as a call of its own, so that the waiters seen below are the ones
    // cancel_session() can cancel.
    Call first{Call::Op::advance, call_time()};
    record(first);
    table_.advance(first.now);
    model_.advance(first.now);
    check(first);
    if (::testing::Test::HasFailure()) return;

    Call c{Call::Op::cancel_session, first.now};
    c.session = pick(3);
    record(c);
    std::vector<RequestId> doomed;
    for (const std::string& key : keys_) {
      for (const WaiterInfo& w : table_.inspect(key).waiters) {
        if (w.session == c.session) doomed.push_back(w.id);
      }
    }
    std::size_t got = table_.cancel_session(c.session, c.now);
    std::size_t want = model_.cancel_session(c.session, c.now);
    EXPECT_EQ(got, want);
    EXPECT_EQ(got, doomed.size());
    for (RequestId id : doomed) {
      for (auto& [key, ids] : queued_) std::erase(ids, id);
      gone_.insert(id);
    }
    check(c);
  }

  // A token to renew or release: mostly one held now, sometimes a stale or foreign one.
  void pick_target(Call& c) {
    c.key = keys_[pick(keys_.size())];
    KeyInfo info = table_.inspect(c.key);
    if (!info.holders.empty() && chance(75)) {
      c.token = info.holders[pick(info.holders.size())].token;
    } else if (!token_owner_.empty() && chance(80)) {
      auto it = token_owner_.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(pick(token_owner_.size())));
      c.token = it->first;
    } else {
      c.token = pick(2) == 0 ? 0 : 1'000'000 + pick(1000);
    }
  }

  // The model's name for (key, token): the request id it was granted to, or 0.
  RequestId model_id(const std::string& key, std::uint64_t token) const {
    auto it = token_owner_.find(token);
    return it != token_owner_.end() && it->second.first == key ? it->second.second : 0;
  }

  void renew() {
    Call c{Call::Op::renew, call_time()};
    pick_target(c);
    c.ttl = milliseconds(1 + pick(60));
    record(c);
    std::optional<Time> got = table_.renew(c.key, c.token, c.ttl, c.now);
    std::optional<Time> want = model_.renew(c.key, model_id(c.key, c.token), c.ttl, c.now);
    EXPECT_EQ(got, want);
    check(c);
  }

  // Many renewals of one lease at one instant, back and forth: they leave stale and
  // duplicate timers behind and make the table compact its timer heap.
  void renew_burst() {
    Call c{Call::Op::renew, call_time()};
    pick_target(c);
    int n = 10 + static_cast<int>(pick(30));
    std::uint64_t base = 1 + pick(40);
    for (int i = 0; i < n && !::testing::Test::HasFailure(); ++i) {
      c.ttl = milliseconds(base + pick(4));
      record(c);
      std::optional<Time> got = table_.renew(c.key, c.token, c.ttl, c.now);
      std::optional<Time> want = model_.renew(c.key, model_id(c.key, c.token), c.ttl, c.now);
      EXPECT_EQ(got, want);
      if (i == 0 || i == n - 1) {
        check(c);
      } else {
        check_events(table_.take_events());
      }
    }
  }

  void release() {
    Call c{Call::Op::release, call_time()};
    pick_target(c);
    record(c);
    bool got = table_.release(c.key, c.token, c.now);
    bool want = model_.release(c.key, model_id(c.key, c.token), c.now);
    EXPECT_EQ(got, want);
    check(c);
  }

  // Releases everything, lets every deadline and lock-delay pass, and expects nothing left.
  void drain() {
    for (int round = 0; round < 50 && !::testing::Test::HasFailure(); ++round) {
      // Catch up first: a lease seen before the advance may be over by now_.
      Call catch_up{Call::Op::advance, now_};
      record(catch_up);
      table_.advance(now_);
      model_.advance(now_);
      check(catch_up);
      bool released = false;
      for (const std::string& key : keys_) {
        for (const HolderInfo& h : table_.inspect(key).holders) {
          Call c{Call::Op::release, now_};
          c.key = key;
          c.token = h.token;
          record(c);
          EXPECT_TRUE(table_.release(key, h.token, now_));
          EXPECT_TRUE(model_.release(key, model_id(key, h.token), now_));
          check(c);
          released = true;
        }
      }
      if (!released && table_.empty()) break;
      if (!released) now_ += milliseconds(1000);  // past every deadline and lock-delay
    }
    EXPECT_TRUE(table_.empty());
    EXPECT_TRUE(model_.keys.empty());
    TableStats s = table_.stats();
    EXPECT_EQ(s.keys + s.holders + s.waiters, 0u);
    EXPECT_EQ(table_.next_wakeup(), std::nullopt);
    for (const auto& [key, ids] : queued_) EXPECT_TRUE(ids.empty()) << key;
  }

  void record(const Call& c) { calls_.push_back(c); }

  Time latest(Time now) {
    latest_ = std::max(latest_, now);
    return latest_;
  }

  void note_grant(const std::string& key, std::uint64_t token, RequestId id) {
    auto last = last_token_.find(key);
    if (last != last_token_.end()) {
      EXPECT_GT(token, last->second) << "tokens of " << key << " went backwards";
    }
    last_token_[key] = token;
    EXPECT_TRUE(token_owner_.emplace(token, std::make_pair(key, id)).second)
        << "token " << token << " handed out twice";
  }

  // Events the table reported for one call.
  void check_events(const std::vector<Event>& events) {
    for (const Event& e : events) {
      const Grant& g = e.grant;
      std::vector<RequestId>& queue = queued_[g.key];
      switch (e.kind) {
        case Event::Kind::granted:
          EXPECT_FALSE(gone_.contains(g.id)) << "request " << g.id << " granted after it left";
          // FIFO: only the oldest request still queued on the key may be granted.
          ASSERT_FALSE(queue.empty()) << "request " << g.id << " granted but never queued";
          EXPECT_EQ(queue.front(), g.id) << "granted out of queue order on " << g.key;
          queue.erase(queue.begin());
          note_grant(g.key, g.token, g.id);
          break;
        case Event::Kind::timed_out:
          EXPECT_EQ(std::erase(queue, g.id), 1u) << "request " << g.id << " timed out twice";
          gone_.insert(g.id);
          break;
        case Event::Kind::set_granted:
          ADD_FAILURE() << "set granted, but this test makes no set requests";
          break;
        case Event::Kind::expired: {
          auto owner = token_owner_.find(g.token);
          ASSERT_NE(owner, token_owner_.end());
          EXPECT_EQ(owner->second, std::make_pair(g.key, g.id));
          EXPECT_LE(g.expires, latest_);
          EXPECT_FALSE(table_.holds(g.key, g.token));
          break;
        }
      }
      own_events_.push_back(ReferenceModel::ModelEvent{
          e.kind, g.id, g.key, g.mode, e.kind == Event::Kind::timed_out ? Time{} : g.expires,
          g.session});
    }
  }

  void check(const Call& c) {
    latest(c.now);
    check_events(table_.take_events());
    check_state(c);
  }

  // Everything observable agrees with the model, and the invariants hold.
  void check_state(const Call& c) {
    Time now = latest(c.now);
    // Grants on different keys are independent, so only each key's own order is compared.
    auto by_key = [](const auto& a, const auto& b) { return a.key < b.key; };
    std::stable_sort(own_events_.begin(), own_events_.end(), by_key);
    std::stable_sort(model_.events.begin(), model_.events.end(), by_key);
    EXPECT_EQ(own_events_, model_.events);
    own_events_.clear();
    model_.events.clear();
    for (const std::string& key : keys_) check_key(key, now);

    TableStats s = table_.stats();
    std::size_t holders = 0;
    std::size_t waiters = 0;
    for (const auto& [key, k] : model_.keys) {
      holders += k.holders.size();
      waiters += k.queue.size();
    }
    EXPECT_EQ(s.keys, model_.keys.size());
    EXPECT_EQ(s.holders, holders);
    EXPECT_EQ(s.waiters, waiters);
    EXPECT_EQ(table_.empty(), model_.keys.empty());
    EXPECT_EQ(table_.next_wakeup(), model_.next_wakeup());
  }

  void check_key(const std::string& key, Time now) {
    KeyInfo info = table_.inspect(key);
    const ReferenceModel::Key* want = model_.find(key);

    // Same holders, waiters and lock-delay as the model. Plain comparisons first, text
    // only on a mismatch: this runs after every call and must stay cheap under ASan.
    bool same = want != nullptr
                    ? info.holders.size() == want->holders.size() &&
                          info.waiters.size() == want->queue.size() &&
                          info.delayed_until == want->delayed_until
                    : info.holders.empty() && info.waiters.empty() && !info.delayed_until;
    for (std::size_t i = 0; same && i < info.holders.size(); ++i) {
      const HolderInfo& h = info.holders[i];
      const auto& m = want->holders[i];
      same = h.id == m.id && h.mode == m.mode && h.expires == m.expires &&
             h.session == m.session && h.permits == m.permits;
    }
    same = same && info.capacity == (want != nullptr ? want->capacity : 0u);
    for (std::size_t i = 0; same && i < info.waiters.size(); ++i) {
      const WaiterInfo& w = info.waiters[i];
      const auto& m = want->queue[i];
      same = w.id == m.id && w.mode == m.mode && w.deadline == m.deadline &&
             w.session == m.session && w.permits == m.permits;
    }
    if (!same) ADD_FAILURE() << "key " << key << " differs from the model\n" << explain(key);

    // Invariants, whatever the model says.
    bool exclusive = false;
    for (std::size_t i = 0; i < info.holders.size(); ++i) {
      const HolderInfo& h = info.holders[i];
      exclusive |= h.mode == Mode::exclusive;
      if (h.expires <= now) ADD_FAILURE() << "a lease past its expiry is still held on " << key;
      if (i > 0 && info.holders[i - 1].token >= h.token) {
        ADD_FAILURE() << "holders of " << key << " are not in token order";
      }
      if (model_id(key, h.token) != h.id) ADD_FAILURE() << "token " << h.token << " not granted";
      if (i == 0) {  // one is enough: the unit tests cover find() itself
        std::optional<Grant> g = table_.find(key, h.token);
        if (!g || g->id != h.id) ADD_FAILURE() << "find() disagrees with inspect() on " << key;
      }
    }
    if (exclusive && info.holders.size() != 1) {
      ADD_FAILURE() << "an exclusive holder is not alone on " << key;
    }
    std::uint64_t held = 0;
    for (const HolderInfo& h : info.holders) held += h.permits;
    if (info.capacity > 0 && held > info.capacity) {
      ADD_FAILURE() << held << " permits held of the " << info.capacity << " of " << key;
    }
    std::vector<RequestId> ids;
    for (const WaiterInfo& w : info.waiters) {
      if (w.deadline <= now) ADD_FAILURE() << "a waiter past its deadline waits on " << key;
      if (gone_.contains(w.id)) ADD_FAILURE() << "cancelled or timed-out " << w.id << " waits";
      ids.push_back(w.id);
    }
    if (ids != queued_[key]) {
      ADD_FAILURE() << "the queue of " << key << " is not the requests queued, in order";
    }
    if (info.delayed_until && *info.delayed_until <= now) {
      ADD_FAILURE() << "a lock-delay that ended still blocks " << key;
    }
    // Nothing waits that could be granted now (no lost wake-up).
    const auto head_fits = [&] {
      if (info.capacity > 0) return held + info.waiters[0].permits <= info.capacity;
      return info.holders.empty() || (info.waiters[0].mode == Mode::shared && !exclusive);
    };
    if (!info.waiters.empty() && !info.delayed_until && head_fits()) {
      ADD_FAILURE() << "the head of " << key << " could be granted but waits";
    }
  }

  // Both sides of one key, for a failure message.
  std::string explain(const std::string& key) const {
    std::ostringstream out;
    KeyInfo info = table_.inspect(key);
    out << "  table:";
    for (const HolderInfo& h : info.holders) {
      out << " holder " << h.id << mode_name(h.mode) << "@" << time_text(h.expires);
    }
    for (const WaiterInfo& w : info.waiters) {
      out << " waiter " << w.id << mode_name(w.mode) << "@" << time_text(w.deadline);
    }
    if (info.delayed_until) out << " delayed until " << time_text(*info.delayed_until);
    out << "\n  model:";
    if (const ReferenceModel::Key* want = model_.find(key)) {
      for (const auto& h : want->holders) {
        out << " holder " << h.id << mode_name(h.mode) << "@" << time_text(h.expires);
      }
      for (const auto& w : want->queue) {
        out << " waiter " << w.id << mode_name(w.mode) << "@" << time_text(w.deadline);
      }
      if (want->delayed_until) out << " delayed until " << time_text(*want->delayed_until);
    }
    return out.str();
  }

  std::mt19937_64 rng_;
  Time now_;
  Time latest_ = Time::min();
  std::vector<std::string> keys_;
  LockTable table_;
  ReferenceModel model_;

  std::vector<Call> calls_;
  std::vector<ReferenceModel::ModelEvent> own_events_;
  std::vector<RequestId> issued_;                         // every request ever queued
  std::map<std::string, std::vector<RequestId>> queued_;  // still queued, in queue order
  std::set<RequestId> gone_;                              // cancelled or timed out
  std::map<std::uint64_t, std::pair<std::string, RequestId>> token_owner_;
  std::map<std::string, std::uint64_t> last_token_;
};

class LockTableProperty : public ::testing::TestWithParam<int> {};

TEST_P(LockTableProperty, RandomSequencesAgreeWithTheReferenceModel) {
  const std::uint64_t seed = env_or("WARDEN_SEED", env_or("WARDEN_TABLE_SEED", kDefaultSeed));
  if (GetParam() == 0)
    std::fprintf(stderr, "seed %llu (WARDEN_SEED)\n", static_cast<unsigned long long>(seed));
  RecordProperty("seed", std::to_string(seed));
  const std::uint64_t per_shard = env_or("WARDEN_TABLE_SEQUENCES_PER_SHARD", kSequencesPerShard);
  std::uint64_t first = static_cast<std::uint64_t>(GetParam()) * per_shard;
  std::uint64_t last = first + per_shard;
  if (const char* only = std::getenv("WARDEN_TABLE_SEQUENCE")) {
    first = std::strtoull(only, nullptr, 0);
    last = GetParam() == 0 ? first + 1 : first;  // run it once, in shard 0
  }
  for (std::uint64_t i = first; i < last; ++i) {
    Sequence s(seed, i);
    s.run();
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "seed=" << seed << " sequence=" << i << " (rerun with WARDEN_SEED=" << seed
                    << " WARDEN_TABLE_SEQUENCE=" << i << ")\ncalls:\n"
                    << s.log();
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, LockTableProperty, ::testing::Range(0, kShards));

// The table is deterministic (Keeper's lesson): the same calls give the same results,
// events and tokens.
TEST(LockTableReplay, SameCallsGiveTheSameResultsEventsAndTokens) {
  for (std::uint64_t i = 0; i < 300; ++i) {
    Sequence s(kDefaultSeed + 1, i);
    s.run();
    ASSERT_FALSE(::testing::Test::HasFailure()) << "sequence " << i << "\n" << s.log();
    LockTable a;
    LockTable b;
    for (const Call& c : s.calls()) {
      std::string from_a = apply(a, c);
      std::string from_b = apply(b, c);
      ASSERT_EQ(from_a, from_b) << "sequence " << i << " at " << describe(c);
    }
    EXPECT_TRUE(a.empty());
  }
}

}  // namespace
}  // namespace warden::table
