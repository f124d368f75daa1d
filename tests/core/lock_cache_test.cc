// core::LockCache on its own (core/lock_cache.h): what take, park and the revokes hand
// back, and when the idle sweeper gives a grant back. The holds are built directly, with
// no client and no backend; the cache only decides, so its answers are all there is.
#include "core/lock_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "support/waiting.h"

namespace warden::core {
namespace {

using namespace std::chrono_literals;
using detail::Hold;
using detail::HoldCaching;
using detail::ThreadKey;
using Holds = LockCache::Holds;

// The lease length every grant here was asked with.
constexpr std::chrono::milliseconds kTtl = 30s;

// Long enough that the sweeper never gives back during a test that is not about it.
constexpr std::chrono::milliseconds kNeverIdle = 1h;

// An active grant of lock "g/<name>", as the watchdog would keep it: no client, no
// thread, asked for at revoke `epoch`.
std::shared_ptr<Hold> grant(const std::string& name, Mode mode, std::uint64_t token,
                            std::uint64_t epoch = 0) {
  const auto now = Clock::now();
  GrantRef ref{LockKey{"g", name}, mode, token, kTtl, "", 0};
  return std::make_shared<Hold>(nullptr, std::move(ref), now + kTtl, now, ThreadKey{0},
                                HoldCaching{true, epoch, kTtl, 0ms});
}

// A GiveBack that records what it is handed, from whichever thread calls it.
class GivenBack {
 public:
  LockCache::GiveBack function() {
    return [this](Holds holds) {
      std::lock_guard guard(mu_);
      for (auto& hold : holds) holds_.push_back(std::move(hold));
    };
  }
  Holds holds() const {
    std::lock_guard guard(mu_);
    return holds_;
  }

 private:
  mutable std::mutex mu_;
  Holds holds_;  // guarded by mu_
};

// A GiveBack for caches whose sweeper must never give anything back.
LockCache::GiveBack no_give_back() {
  return [](const Holds& holds) {
    ADD_FAILURE() << "the sweeper gave back " << holds.size() << " grant(s)";
  };
}

Holds sorted_by_token(Holds holds) {
  std::sort(holds.begin(), holds.end(),
            [](const auto& x, const auto& y) { return x->grant.token < y->grant.token; });
  return holds;
}

// --- take

TEST(LockCache, TakeInTheParkedModeReturnsTheGrantAndEmptiesItsEntry) {
  LockCache cache(8, kNeverIdle, no_give_back());
  const auto a = grant("a", Mode::exclusive, 7);
  EXPECT_TRUE(cache.park(a).empty());
  EXPECT_EQ(cache.size(), 1u);

  LockCache::Taken taken = cache.take("g/a", Mode::exclusive, kTtl, 0ms);
  EXPECT_EQ(taken.hit, a);
  EXPECT_TRUE(taken.give_back.empty());
  EXPECT_EQ(cache.size(), 0u);

  taken = cache.take("g/a", Mode::exclusive, kTtl, 0ms);
  EXPECT_EQ(taken.hit, nullptr) << "the grant was taken out once already";
  EXPECT_TRUE(taken.give_back.empty());
}

TEST(LockCache, TakeInTheOtherModeHandsTheGrantBackAndIsNoHit) {
  LockCache cache(8, kNeverIdle, no_give_back());
  const auto shared = grant("s", Mode::shared, 3);
  const auto exclusive = grant("x", Mode::exclusive, 4);
  cache.park(shared);
  cache.park(exclusive);

  LockCache::Taken taken = cache.take("g/s", Mode::exclusive, kTtl, 0ms);
  EXPECT_EQ(taken.hit, nullptr) << "a shared grant cannot be counted exclusive";
  EXPECT_EQ(taken.give_back, (Holds{shared}));

  taken = cache.take("g/x", Mode::shared, kTtl, 0ms);
  EXPECT_EQ(taken.hit, nullptr) << "an exclusive grant would keep other shared holders out";
  EXPECT_EQ(taken.give_back, (Holds{exclusive}));
  EXPECT_EQ(cache.size(), 0u);
}

// A hit serves only a request that asks for the lease length and lock delay the grant
// was asked with; otherwise the cached grant goes back and the backend is asked.
TEST(LockCache, TakeWithAnotherTtlOrLockDelayHandsTheGrantBackAndIsNoHit) {
  LockCache cache(8, kNeverIdle, no_give_back());
  for (const auto& [ttl, delay] : {std::pair{kTtl + 1ms, 0ms}, std::pair{kTtl, 500ms}}) {
    const auto a = grant("a", Mode::exclusive, 7);
    ASSERT_TRUE(cache.park(a).empty());
    const LockCache::Taken taken = cache.take("g/a", Mode::exclusive, ttl, delay);
    EXPECT_EQ(taken.hit, nullptr) << "ttl " << ttl.count() << " ms, lock delay " << delay.count();
    EXPECT_EQ(taken.give_back, (Holds{a}));
    EXPECT_EQ(cache.size(), 0u);
  }
}

TEST(LockCache, TakeOfALostGrantHandsItBack) {
  LockCache cache(8, kNeverIdle, no_give_back());
  const auto a = grant("a", Mode::exclusive, 7);
  cache.park(a);
  a->mark_lost();

  const LockCache::Taken taken = cache.take("g/a", Mode::exclusive, kTtl, 0ms);
  EXPECT_EQ(taken.hit, nullptr);
  EXPECT_EQ(taken.give_back, (Holds{a}));
  EXPECT_EQ(cache.size(), 0u);
}

// --- revoke

TEST(LockCache, RevokeOfAnIdleCachedGrantReturnsItAtOnce) {
  LockCache cache(8, kNeverIdle, no_give_back());
  const auto a = grant("a", Mode::exclusive, 7);
  cache.park(a);

  EXPECT_EQ(cache.revoke("g/a", 7), (Holds{a}));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.take("g/a", Mode::exclusive, kTtl, 0ms).hit, nullptr);
}

TEST(LockCache, RevokeOfAnotherTokenLeavesTheCachedGrantAndWaitsForItsOwn) {
  LockCache cache(8, kNeverIdle, no_give_back());
  const auto old_grant = grant("a", Mode::exclusive, 7);
  cache.park(old_grant);

  EXPECT_TRUE(cache.revoke("g/a", 8).empty()) << "token 8 is not the grant cached";
  EXPECT_EQ(cache.take("g/a", Mode::exclusive, kTtl, 0ms).hit, old_grant);

  // The grant with token 8 arrives after its revoke: parking it hands it straight back.
  const auto new_grant = grant("a", Mode::exclusive, 8);
  EXPECT_EQ(cache.park(new_grant), (Holds{new_grant}));
  EXPECT_EQ(cache.size(), 0u);
}

TEST(LockCache, ARevokeThatOvertookItsGrantGivesTheGrantBackWhenParked) {
  LockCache cache(8, kNeverIdle, no_give_back());
  EXPECT_TRUE(cache.revoke("g/a", 9).empty()) << "nothing cached yet";

  const auto a = grant("a", Mode::exclusive, 9);
  EXPECT_EQ(cache.park(a), (Holds{a}));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.take("g/a", Mode::exclusive, kTtl, 0ms).hit, nullptr);
}

TEST(LockCache, ParkingALaterTokenKeepsTheGrantAndTheEarlierRevokeForItsOwnHold) {
  LockCache cache(8, kNeverIdle, no_give_back());
  EXPECT_TRUE(cache.revoke("g/a", 5).empty());

  const auto later = grant("a", Mode::exclusive, 6);
  EXPECT_TRUE(cache.park(later).empty()) << "the revoke was for another grant";
  EXPECT_EQ(cache.size(), 1u);
  // Still remembered for the grant it names (another thread's shared grant, say).
  EXPECT_TRUE(cache.revoked(*grant("a", Mode::exclusive, 5)));
  EXPECT_EQ(cache.take("g/a", Mode::exclusive, kTtl, 0ms).hit, later);
}

// One client, two threads, two shared grants of one lock: each revoke finds its own
// grant, whichever comes first and whether the grant is held or cached when it comes.
TEST(LockCache, TwoSharedGrantsOfOneLockAreEachRevokedInEitherOrder) {
  for (const bool first_revoke_first : {true, false}) {
    SCOPED_TRACE(first_revoke_first ? "revoke 1 then 2" : "revoke 2 then 1");
    LockCache cache(8, kNeverIdle, no_give_back());
    const auto one = grant("a", Mode::shared, 1);  // both held by threads
    const auto two = grant("a", Mode::shared, 2);
    for (const std::uint64_t token : first_revoke_first ? std::array{1, 2} : std::array{2, 1}) {
      EXPECT_TRUE(cache.revoke("g/a", token).empty());
    }
    EXPECT_TRUE(cache.revoked(*one)) << "grant 1's revoke was lost";
    EXPECT_TRUE(cache.revoked(*two)) << "grant 2's revoke was lost";
  }
  for (const bool parked_revoke_first : {true, false}) {
    SCOPED_TRACE(parked_revoke_first ? "cached one revoked first" : "held one revoked first");
    LockCache cache(8, kNeverIdle, no_give_back());
    const auto cached = grant("a", Mode::shared, 1);
    const auto held = grant("a", Mode::shared, 2);
    ASSERT_TRUE(cache.park(cached).empty());
    if (parked_revoke_first) {
      EXPECT_EQ(cache.revoke("g/a", 1), (Holds{cached}));
      EXPECT_TRUE(cache.revoke("g/a", 2).empty());
    } else {
      EXPECT_TRUE(cache.revoke("g/a", 2).empty());
      EXPECT_EQ(cache.revoke("g/a", 1), (Holds{cached}));
    }
    EXPECT_TRUE(cache.revoked(*held)) << "the held grant's revoke was lost";
    EXPECT_EQ(cache.size(), 0u);
  }
  // A grant parked while another's revoke waits for it keeps both apart.
  LockCache cache(8, kNeverIdle, no_give_back());
  const auto one = grant("a", Mode::shared, 1);
  const auto two = grant("a", Mode::shared, 2);
  EXPECT_TRUE(cache.revoke("g/a", 1).empty());
  EXPECT_TRUE(cache.park(two).empty()) << "grant 2 was not revoked";
  EXPECT_TRUE(cache.revoked(*one)) << "parking grant 2 lost grant 1's revoke";
}

TEST(LockCache, RevokedIsTrueOnceForARememberedRevoke) {
  LockCache cache(8, kNeverIdle, no_give_back());
  const auto held = grant("a", Mode::exclusive, 7);  // held by a thread, so not cached
  EXPECT_FALSE(cache.revoked(*held));

  EXPECT_TRUE(cache.revoke("g/a", 7).empty());
  EXPECT_FALSE(cache.revoked(*grant("a", Mode::exclusive, 6))) << "another token";
  EXPECT_TRUE(cache.revoked(*held));
  EXPECT_FALSE(cache.revoked(*held)) << "the revoke is forgotten once reported";
  EXPECT_TRUE(cache.park(held).empty()) << "nor does it hand the grant back when parked";
}

// --- revoke everything

TEST(LockCache, RevokeEverythingReturnsEveryCachedGrantAndRevokesEveryOlderHold) {
  LockCache cache(8, kNeverIdle, no_give_back());
  const std::uint64_t before = cache.epoch();
  const auto a = grant("a", Mode::exclusive, 1, before);
  const auto b = grant("b", Mode::shared, 2, before);
  const auto held = grant("c", Mode::exclusive, 3, before);  // held by a thread meanwhile
  cache.park(a);
  cache.park(b);

  EXPECT_EQ(sorted_by_token(cache.revoke_everything()), (Holds{a, b}));
  EXPECT_EQ(cache.size(), 0u);
  const std::uint64_t after = cache.epoch();
  EXPECT_GT(after, before);

  EXPECT_TRUE(cache.revoked(*held));
  EXPECT_EQ(cache.park(held), (Holds{held}));
  EXPECT_EQ(cache.size(), 0u);

  // A grant asked for after the revoke is not touched by it.
  const auto fresh = grant("c", Mode::exclusive, 4, after);
  EXPECT_FALSE(cache.revoked(*fresh));
  EXPECT_TRUE(cache.park(fresh).empty());
  EXPECT_EQ(cache.size(), 1u);
}

// --- capacity

TEST(LockCache, ParkBeyondCapacityReturnsTheLongestUnusedGrant) {
  LockCache cache(2, kNeverIdle, no_give_back());
  const auto a = grant("a", Mode::exclusive, 1);
  const auto b = grant("b", Mode::exclusive, 2);
  const auto c = grant("c", Mode::exclusive, 3);
  const auto d = grant("d", Mode::exclusive, 4);
  // Parks 1 ms apart, so their idle times differ on any clock.
  EXPECT_TRUE(cache.park(a).empty());
  std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(cache.park(b).empty());
  std::this_thread::sleep_for(1ms);
  EXPECT_EQ(cache.park(c), (Holds{a}));
  EXPECT_EQ(cache.size(), 2u);

  // Used again, b becomes the most recent: c is now the longest unused, not the first by name.
  EXPECT_EQ(cache.take("g/b", Mode::exclusive, kTtl, 0ms).hit, b);
  std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(cache.park(b).empty());
  std::this_thread::sleep_for(1ms);
  EXPECT_EQ(cache.park(d), (Holds{c}));
  EXPECT_EQ(cache.take("g/b", Mode::exclusive, kTtl, 0ms).hit, b);
  EXPECT_EQ(cache.take("g/d", Mode::exclusive, kTtl, 0ms).hit, d);
}

// --- the idle sweeper

TEST(LockCache, TheSweeperGivesBackAGrantUnusedForIdle) {
  constexpr auto kIdle = 50ms;
  GivenBack given;
  LockCache cache(8, kIdle, given.function());
  const auto a = grant("a", Mode::exclusive, 7);
  const auto parked_at = Clock::now();
  cache.park(a);

  ASSERT_TRUE(testing::eventually([&] { return !given.holds().empty(); }))
      << "not given back within 5 s";
  EXPECT_GE(Clock::now() - parked_at, kIdle) << "given back before it was idle long enough";
  EXPECT_EQ(given.holds(), (Holds{a}));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.take("g/a", Mode::exclusive, kTtl, 0ms).hit, nullptr);
}

TEST(LockCache, AfterStopSweepingDrainReturnsWhatIsLeftAndNothingIsGivenBack) {
  constexpr auto kIdle = 50ms;
  GivenBack given;
  LockCache cache(8, kIdle, given.function());
  const auto a = grant("a", Mode::exclusive, 1);
  const auto b = grant("b", Mode::exclusive, 2);
  cache.park(a);
  cache.park(b);
  cache.stop_sweeping();
  // Only a stall of a whole idle period between park and stop lets the sweeper give back
  // first; whatever it gave then is accounted for below.
  const Holds swept = given.holds();
  const auto c = grant("c", Mode::exclusive, 3);
  cache.park(c);  // no sweeper starts again

  std::this_thread::sleep_for(5 * kIdle);
  EXPECT_EQ(given.holds(), swept) << "given back after stop_sweeping";

  Holds all = cache.drain();
  all.insert(all.end(), swept.begin(), swept.end());
  EXPECT_EQ(sorted_by_token(all), (Holds{a, b, c}));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_TRUE(cache.drain().empty());

  std::this_thread::sleep_for(2 * kIdle);
  EXPECT_EQ(given.holds(), swept) << "given back after drain";
}

}  // namespace
}  // namespace warden::core
