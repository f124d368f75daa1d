// MultiLockConformance: several locks all or nothing, in one global order.
#include "warden/multi_lock.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "conformance/multi_lock_suite.h"

namespace warden::conformance {
namespace {

std::vector<std::string> names_of(const std::vector<LockSpec>& members) {
  std::vector<std::string> names;
  for (const LockSpec& member : members) names.push_back(member.name);
  return names;
}

// true if another owner (a client of its own) can take (group, name) exclusively at once.
bool free_for_others(Client& other, const std::string& group, const std::string& name,
                     const LockOptions& options) {
  Lease probe = other.lock(group, name, options).acquire(Mode::exclusive, Wait::none());
  return probe.valid();
}

// true if it is free for `other`, or becomes so within kPatience: a multi-lease dropped by
// another client sends its releases without waiting (docs/contract.md).
bool freed_for_others(Client& other, const std::string& group, const std::string& name,
                      const LockOptions& options) {
  return eventually([&] { return free_for_others(other, group, name, options); });
}

TEST_P(MultiLockConformance, HoldsEveryMemberWithATokenOfItsOwn) {
  Client a = open_client();
  Client b = open_client();
  MultiLock three =
      a.multi({{group(), "x"}, {group(), "y"}, {group(), "z", Mode::exclusive}}, lock_options());
  MultiLease held = three.acquire(Wait::none());
  ASSERT_TRUE(held);
  ASSERT_EQ(held.leases().size(), 3u);
  ASSERT_EQ(held.tokens().size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const Lease& lease = held.leases()[i];
    EXPECT_EQ(lease.name(), std::string(1, static_cast<char>('x' + i)));
    EXPECT_EQ(lease.mode(), Mode::exclusive);
    EXPECT_EQ(lease.token(), held.tokens()[i]);
    EXPECT_GT(lease.token(), 0u);
    EXPECT_FALSE(free_for_others(b, group(), lease.name(), lock_options()))
        << lease.name() << " must be held";
  }
  EXPECT_FALSE(held.lost());
}

// A member's release that this client sent without waiting (unlock(), a Lease dropped)
// is settled before a try of the set reads the member (docs/contract.md): the client
// never sees its own release as still pending, whether the engine takes the set in one
// step (warden://) or member by member.
TEST_P(MultiLockConformance, ATryOfTheSetRightAfterAMembersUnlockFindsItFree) {
  Client a = open_client();
  Lock x = a.lock(group(), "x", lock_options());
  MultiLock both = a.multi({{group(), "x"}, {group(), "y"}}, lock_options());
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(x.try_lock()) << "cycle " << i;
    x.unlock();
    MultiLease held = both.acquire(Wait::none());
    ASSERT_TRUE(held) << "cycle " << i << ": the set's try was refused after this thread's unlock";
    held.release();
  }
}

// Many members, and members with long names: on warden:// the first go in one
// ACQUIRESET of 83 arguments, the second would not fit in one request (150 names of 500
// bytes) and are taken one by one. Either way: every member held, then every one free.
// The second case is about that fallback, so it runs where sets go in one step (elsewhere
// it would only ask for more locks than mysql://'s 64 sessions per client hold).
TEST_P(MultiLockConformance, ManyAndLongMembersAreAllTakenAndAllFreed) {
  Client a = open_client();
  Client b = open_client();
  for (const auto& [count, length] : {std::pair{40, 8}, std::pair{150, 500}}) {
    if (count > 40 && !capabilities().atomic_multi) continue;
    std::vector<LockSpec> members;
    for (int i = 0; i < count; ++i) {
      std::string name = std::to_string(i);
      name.resize(static_cast<std::size_t>(length), 'n');
      members.push_back({group(), name});
    }
    MultiLease held = a.multi(members, lock_options()).acquire(Wait::up_to(kPatience));
    ASSERT_TRUE(held) << count << " members";
    ASSERT_EQ(held.leases().size(), static_cast<std::size_t>(count));
    EXPECT_FALSE(free_for_others(b, group(), members.front().name, lock_options()));
    EXPECT_FALSE(free_for_others(b, group(), members.back().name, lock_options()));
    held.release();
    EXPECT_TRUE(freed_for_others(b, group(), members.back().name, lock_options()));
  }
}

TEST_P(MultiLockConformance, MembersAreTakenInOneOrderWhateverTheOrderGiven) {
  Client a = open_client();
  MultiLock given = a.multi({{group(), "b"}, {group(), "c"}, {group(), "a"}}, lock_options());
  EXPECT_EQ(names_of(given.members()), (std::vector<std::string>{"a", "b", "c"}));
  MultiLease held = given.acquire(Wait::none());
  ASSERT_TRUE(held);
  EXPECT_EQ(held.leases()[0].name(), "a");
  EXPECT_EQ(held.leases()[2].name(), "c");
  // Groups sort before names, bytewise ('-' is the smallest byte a group may have).
  MultiLock across = a.multi({{group(), "a"}, {"-", "z"}}, lock_options());
  EXPECT_EQ(across.members()[0].group, "-");
}

TEST_P(MultiLockConformance, ReleaseFreesEveryMemberAndEmptiesTheLease) {
  Client a = open_client();
  Client b = open_client();
  MultiLease held = a.multi({{group(), "x"}, {group(), "y"}}, lock_options()).acquire(Wait::none());
  ASSERT_TRUE(held);
  held.release();
  EXPECT_FALSE(held.valid());
  EXPECT_TRUE(freed_for_others(b, group(), "x", lock_options()));
  EXPECT_TRUE(freed_for_others(b, group(), "y", lock_options()));
  EXPECT_NO_THROW(held.release()) << "idempotent";
}

TEST_P(MultiLockConformance, DestroyingTheLeaseFreesEveryMember) {
  Client a = open_client();
  Client b = open_client();
  {
    MultiLease held =
        a.multi({{group(), "x"}, {group(), "y"}}, lock_options()).acquire(Wait::none());
    ASSERT_TRUE(held);
  }
  EXPECT_TRUE(freed_for_others(b, group(), "x", lock_options()));
  EXPECT_TRUE(freed_for_others(b, group(), "y", lock_options()));
}

TEST_P(MultiLockConformance, AWaitThatRunsOutLeavesNoMemberHeld) {
  Client a = open_client();
  Client b = open_client();
  Client c = open_client();
  Lease middle = b.lock(group(), "m").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(middle);
  MultiLock three = a.multi({{group(), "a"}, {group(), "m"}, {group(), "z"}}, lock_options());
  MultiLease none;
  EXPECT_TRUE(returns_before(kLongDeadline, [&] { none = three.acquire(Wait::up_to(300ms)); }));
  EXPECT_FALSE(none);
  EXPECT_TRUE(freed_for_others(c, group(), "a", lock_options())) << "taken before m, then let go";
  EXPECT_TRUE(freed_for_others(c, group(), "z", lock_options())) << "never taken";
  middle.release();
  MultiLease all = three.acquire(Wait::up_to(kPatience));
  EXPECT_TRUE(all) << "nothing of the failed try is left in the way";
}

TEST_P(MultiLockConformance, TryOnceFailsAtTheFirstBusyMemberAndLeavesNothing) {
  Client a = open_client();
  Client b = open_client();
  Client c = open_client();
  Lease last = b.lock(group(), "z").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(last);
  MultiLease none = a.multi({{group(), "a"}, {group(), "z"}}, lock_options()).acquire(Wait::none());
  EXPECT_FALSE(none);
  EXPECT_TRUE(freed_for_others(c, group(), "a", lock_options()));
}

TEST_P(MultiLockConformance, CancellingTheWaitLeavesNoMemberHeld) {
  Client a = open_client();
  Client b = open_client();
  Client c = open_client();
  Lease middle = b.lock(group(), "m").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(middle);
  MultiLock pair = a.multi({{group(), "a"}, {group(), "m"}}, lock_options());
  std::stop_source stop;
  Flag finished;
  bool granted = true;
  std::jthread waiter([&] {
    granted = pair.acquire(Wait::forever(), stop.get_token()).valid();
    finished.set();
  });
  ASSERT_TRUE(queue_reaches("m", 1)) << "the multi-lock waits for m";
  stop.request_stop();
  ASSERT_TRUE(finished.wait_for(kPatience));
  waiter.join();
  EXPECT_FALSE(granted);
  EXPECT_TRUE(freed_for_others(c, group(), "a", lock_options()));
  EXPECT_TRUE(queue_reaches("m", 0)) << "the cancelled wait left no trace";
  EXPECT_TRUE(queue_reaches("a", 0));
}

TEST_P(MultiLockConformance, AnErrorOnAMemberReleasesTheMembersTakenBefore) {
  // This thread holds "z" lost (no renewals, a short TTL): acquiring it again throws
  // Error(lost) until that count is released, after the multi-lock has taken "a".
  Client a = open_client_without_renewals();
  Client c = open_client();
  const LockOptions short_lease = lock_options_with_ttl(400ms);
  Lease stale = a.lock(group(), "z", short_lease).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(stale);
  ASSERT_TRUE(eventually([&] { return stale.lost(); }, kPatience + 400ms));
  MultiLock pair = a.multi({{group(), "a"}, {group(), "z"}}, lock_options());
  EXPECT_TRUE(throws_error(Errc::lost, [&] { MultiLease held = pair.acquire(Wait::none()); }));
  EXPECT_TRUE(freed_for_others(c, group(), "a", lock_options()));
}

// Where the backend grants a set in one step, a waiting multi-lock holds none of its
// members, so others keep using them meanwhile: a non-fair request takes a free member
// past the waiting set. One by one, the members before the busy one are held instead.
TEST_P(MultiLockConformance, WaitingMultiLockHoldsMembersOnlyWhenTakenOneByOne) {
  Client a = open_client();
  Client b = open_client();
  Client c = open_client();
  Lease last = b.lock(group(), "z").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(last);
  MultiLock pair = a.multi({{group(), "a"}, {group(), "z"}}, lock_options());
  std::stop_source stop;
  std::jthread waiter([&] { MultiLease held = pair.acquire(Wait::forever(), stop.get_token()); });
  ASSERT_TRUE(queue_reaches("z", 1));
  if (capabilities().atomic_multi) {
    EXPECT_TRUE(c.inspect(group(), "a").holders.empty());
    LockOptions barging = lock_options();
    barging.fairness = Fairness::non_fair;
    Lease passing = c.lock(group(), "a", barging).acquire(Mode::exclusive, Wait::none());
    EXPECT_TRUE(passing) << "a is free while the multi-lock waits";
  } else {
    EXPECT_TRUE(eventually([&] { return !free_for_others(c, group(), "a", lock_options()); }));
  }
  stop.request_stop();
}

TEST_P(MultiLockConformance, AMemberTheThreadHoldsIsCountedOnItsHold) {
  Client a = open_client();
  Client b = open_client();
  Lease x = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(x);
  {
    MultiLease held =
        a.multi({{group(), "x"}, {group(), "y"}}, lock_options()).acquire(Wait::none());
    ASSERT_TRUE(held) << "x is this thread's already: reentrant, not busy";
    EXPECT_EQ(held.leases()[0].token(), x.token()) << "the same backend grant";
  }
  EXPECT_FALSE(free_for_others(b, group(), "x", lock_options())) << "x's own count remains";
  EXPECT_TRUE(freed_for_others(b, group(), "y", lock_options()));
}

TEST_P(MultiLockConformance, LostAsSoonAsAnyMemberIsLost) {
  Client a = open_client_without_renewals();
  const LockOptions short_lease = lock_options_with_ttl(400ms);
  MultiLease held = a.multi({{group(), "x"}, {group(), "y"}}, short_lease).acquire(Wait::none());
  ASSERT_TRUE(held);
  Flag told;
  Flag token_fired;
  held.on_lost([&] { told.set(); });
  std::stop_callback on_token(held.lost_token(), [&] { token_fired.set(); });
  EXPECT_TRUE(told.wait_for(kPatience + 400ms));
  EXPECT_TRUE(token_fired.wait_for(kPatience));
  EXPECT_TRUE(held.lost());
  Flag late;
  held.on_lost([&] { late.set(); });
  EXPECT_TRUE(late.is_set()) << "a callback set after the loss runs at once";
  EXPECT_NO_THROW(held.release()) << "releasing lost members needs no backend";
}

// A member the thread held before is counted on that hold; the multi-lock's loss
// signal must not take the hold's callback from the caller's own Lease.
TEST_P(MultiLockConformance, ALeaseOfAMemberKeepsItsOwnLostCallback) {
  Client a = open_client_without_renewals();
  const LockOptions short_lease = lock_options_with_ttl(400ms);
  Lease x = a.lock(group(), "x", short_lease).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(x);
  Flag x_told;
  x.on_lost([&] { x_told.set(); });
  MultiLease held = a.multi({{group(), "x"}, {group(), "y"}}, short_lease).acquire(Wait::none());
  ASSERT_TRUE(held);
  Flag held_told;
  held.on_lost([&] { held_told.set(); });
  EXPECT_TRUE(x_told.wait_for(kPatience + 400ms)) << "x's own callback was replaced";
  EXPECT_TRUE(held_told.wait_for(kPatience));
}

TEST_P(MultiLockConformance, SplitHandsTheMembersOverOneByOne) {
  Client a = open_client();
  Client b = open_client();
  MultiLease held = a.multi({{group(), "x"}, {group(), "y"}}, lock_options()).acquire(Wait::none());
  ASSERT_TRUE(held);
  std::vector<Lease> members = std::move(held).split();
  EXPECT_FALSE(held.valid());  // NOLINT(bugprone-use-after-move): split() empties it
  ASSERT_EQ(members.size(), 2u);
  members[0].release();
  EXPECT_TRUE(freed_for_others(b, group(), "x", lock_options()));
  EXPECT_FALSE(free_for_others(b, group(), "y", lock_options()));
}

TEST_P(MultiLockConformance, BadMembersAreRefusedBeforeAnyIo) {
  Client a = open_client();
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { a.multi({}); }));
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] {
    a.multi({{group(), "x"}, {group(), "x", Mode::shared}});
  })) << "the same lock twice, whatever the modes";
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { a.multi({{"bad/group", "x"}}); }));
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { a.multi({{group(), ""}}); }));
  std::vector<LockSpec> too_many;
  for (int i = 0; i < 1025; ++i) too_many.push_back({group(), "n" + std::to_string(i)});
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { a.multi(too_many); }));
  LockOptions bad_ttl = lock_options();
  bad_ttl.ttl = 1ms;
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { a.multi({{group(), "x"}}, bad_ttl); }));
  if (!capabilities().shared) {
    EXPECT_TRUE(throws_error(Errc::unsupported, [&] {
      a.multi({{group(), "x"}, {group(), "y", Mode::shared}});
    }));
  }
}

// The seeds' transfer: 8 threads move money from alice to bob and 8 from bob to alice,
// each naming the two accounts in its own direction's order, for 10 s. Without the one
// global order the two directions deadlock (each holds one account and waits for the
// other) and their waits run out; without mutual exclusion two transfers interleave,
// which the accounts see (`inside`), and updates get lost, which the sum sees.
TEST_P(MultiLockConformance, OppositeTransfersNeitherDeadlockNorOverlapAndConserveMoney) {
  constexpr int kPerDirection = 8;
  constexpr auto kRun = 10s;
  constexpr long kOpening = 1'000'000;

  struct Account {
    std::atomic<long> balance{kOpening};
    std::atomic<int> inside{0};
    std::atomic<std::uint64_t> last_token{0};
  };
  std::array<Account, 2> accounts;  // [0] alice, [1] bob: the members' sorted order
  std::atomic<int> overlaps{0};
  std::atomic<int> stale_tokens{0};
  std::atomic<int> stalls{0};
  std::atomic<int> errors{0};
  std::array<std::atomic<long>, 2 * kPerDirection> moves{};

  auto enter = [&](Account& account, std::uint64_t token) {
    if (account.inside.fetch_add(1) != 0) ++overlaps;
    if (account.last_token.exchange(token) >= token) ++stale_tokens;
  };
  auto transfer = [&](int index, bool alice_to_bob) {
    try {
      Client client = open_client();
      std::vector<LockSpec> members{{group(), "alice"}, {group(), "bob"}};
      if (!alice_to_bob) std::swap(members[0], members[1]);
      MultiLock pair = client.multi(members, lock_options());
      Account& from = accounts[alice_to_bob ? 0 : 1];
      Account& to = accounts[alice_to_bob ? 1 : 0];
      const auto end = Clock::now() + kRun;
      while (Clock::now() < end) {
        MultiLease both = pair.acquire(Wait::up_to(kLongDeadline));
        if (!both) {
          ++stalls;
          return;
        }
        const auto tokens = both.tokens();
        enter(accounts[0], tokens[0]);
        enter(accounts[1], tokens[1]);
        // A read, a pause and a write: an interleaved transfer loses an update.
        const long debit = from.balance.load();
        std::this_thread::yield();
        from.balance.store(debit - 1);
        const long credit = to.balance.load();
        std::this_thread::yield();
        to.balance.store(credit + 1);
        accounts[1].inside.fetch_sub(1);
        accounts[0].inside.fetch_sub(1);
        ++moves[static_cast<std::size_t>(index)];
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "transfer thread " << index << ": " << e.what();
      ++errors;
    }
  };
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < 2 * kPerDirection; ++i) threads.emplace_back(transfer, i, i % 2 == 0);
  }
  EXPECT_EQ(stalls.load(), 0) << "a transfer waited " << kLongDeadline / 1s
                              << " s for its accounts: deadlock";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(overlaps.load(), 0) << "two transfers held an account at once";
  EXPECT_EQ(stale_tokens.load(), 0) << "an account saw a token not above the last one";
  EXPECT_EQ(accounts[0].balance.load() + accounts[1].balance.load(), 2 * kOpening);
  long total = 0;
  for (std::size_t i = 0; i < moves.size(); ++i) {
    EXPECT_GT(moves[i].load(), 0) << "thread " << i << " never got both accounts";
    total += moves[i].load();
  }
  RecordProperty("transfers", std::to_string(total));
}

}  // namespace
}  // namespace warden::conformance
