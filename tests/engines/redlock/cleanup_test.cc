// redlock:// leaves no grant key behind: after a release, a try that failed, a wait
// that timed out or was cancelled, and a Client closed while holding, no master holds
// a grant key of the caller's. An acquire that lost the vote takes back the keys it set
// on the masters it did win. Fence counters stay, by design.
#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

// The value of another owner's grant key, planted behind the engine's back.
constexpr const char* kForeign = "someone-else";

// Per up master: the grant key's value, nullopt if none.
std::vector<std::optional<std::string>> grant_values(RedisMasters& masters, std::string_view name) {
  std::vector<std::optional<std::string>> values;
  for (const auto& k : masters.read(grant_key("g", name))) values.push_back(k.value);
  return values;
}

TEST(RedlockCleanup, ReleaseDeletesTheGrantKeysAndKeepsTheFenceCounters) {
  RedisMasters masters(5);
  Client client = Client::open(masters.uri(), redlock_options());
  Lease a = client.lock("g", "a").acquire(Mode::exclusive, Wait::none());
  Lease b = client.lock("g", "b").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(masters.grant_keys().size(), 10u) << describe_keys(masters.grant_keys());
  a.release();
  EXPECT_EQ(masters.holding("g", "a"), std::vector<int>{});
  EXPECT_EQ(masters.holding("g", "b").size(), 5u) << "releasing a touched b";
  b.release();
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
  for (std::string_view name : {"a", "b"}) {
    int counters = 0;
    for (const auto& f : masters.fences("g", name)) counters += f ? 1 : 0;
    EXPECT_GE(counters, masters.quorum()) << name << ": fence counters were deleted";
  }
}

TEST(RedlockCleanup, TryOnAHeldLockLeavesOnlyTheHoldersKeys) {
  RedisMasters masters(5);
  Client holder = Client::open(masters.uri(), redlock_options());
  Client other = Client::open(masters.uri(), redlock_options());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto before = grant_values(masters, "x");
  EXPECT_FALSE(other.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_EQ(grant_values(masters, "x"), before) << "the failed try touched the holder's keys";
  held.release();
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockCleanup, TryThatLostTheVoteTakesBackTheKeysItWon) {
  RedisMasters masters(5);
  // Retries 30 s apart: a try that retried would take that long, far more than any
  // slowness of the machine.
  RedlockParams params;
  params.retry_delay = 30'000ms;
  params.retry_jitter = 0ms;
  params.retry_count = 1;
  Client client = Client::open(masters.uri(params.query()), redlock_options());
  // Another owner holds masters 0..2, a majority: the try wins masters 3 and 4 only.
  masters.plant("g", "x", {0, 1, 2}, kForeign, 30s);
  const auto started = Clock::now();
  EXPECT_FALSE(client.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  const auto took = Clock::now() - started;
  EXPECT_LT(took, params.retry_delay) << "a majority said 'held', yet the try retried";
  EXPECT_TRUE(comes_to_holding(masters, "g", "x", {0, 1, 2}))
      << "the try left keys on the masters it won:" << describe_masters(masters.holding("g", "x"));
  for (const auto& k : masters.read(grant_key("g", "x"))) {
    if (k.value) {
      EXPECT_EQ(*k.value, kForeign) << "m" << k.master << ": the owner's key changed";
    }
  }
  masters.drop("g", "x");
}

TEST(RedlockCleanup, TimedOutWaitLeavesNoKeyOfItsOwn) {
  RedisMasters masters(5);
  Client holder = Client::open(masters.uri(), redlock_options());
  Client waiter = Client::open(masters.uri(), redlock_options());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto before = grant_values(masters, "x");
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_EQ(grant_values(masters, "x"), before);

  // Split: the waiter wins masters 3 and 4 in every attempt and must take them back.
  masters.plant("g", "y", {0, 1, 2}, kForeign, 30s);
  EXPECT_FALSE(waiter.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_TRUE(comes_to_holding(masters, "g", "y", {0, 1, 2}))
      << "the timed-out wait left keys on the masters it won:" << describe_masters(masters.holding("g", "y"));
  masters.drop("g", "y");
  held.release();
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockCleanup, CancelledWaitEndsPromptlyAndLeavesNoKeyOfItsOwn) {
  RedisMasters masters(5);
  Client waiter = Client::open(masters.uri(), redlock_options());
  masters.plant("g", "x", {0, 1, 2}, kForeign, 30s);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.lock("g", "x").acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  });
  std::this_thread::sleep_for(300ms);  // several attempts
  ASSERT_EQ(waiting.wait_for(0s), std::future_status::timeout) << "the wait ended by itself";
  stop.request_stop();
  ASSERT_EQ(waiting.wait_for(kPrompt), std::future_status::ready) << "cancel did not end the wait";
  EXPECT_FALSE(waiting.get());
  EXPECT_TRUE(comes_to_holding(masters, "g", "x", {0, 1, 2}))
      << "the cancelled wait left keys on the masters it won:" << describe_masters(masters.holding("g", "x"));
  masters.drop("g", "x");
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockCleanup, ClosedClientReleasesWhatItHeld) {
  RedisMasters masters(3);
  {
    // Lockable counts never unlocked: the client's last handle going away releases
    // them (ClientState's destructor), rather than leaving them to expire.
    Client client = Client::open(masters.uri(), redlock_options(30s));
    Lock x = client.lock("g", "x");
    Lock y = client.lock("g", "y");
    ASSERT_TRUE(x.try_lock());
    ASSERT_TRUE(y.try_lock());
    EXPECT_EQ(masters.grant_keys().size(), 6u);
  }
  EXPECT_TRUE(no_grant_keys(masters)) << "left:" << describe_keys(masters.grant_keys());

  // A Lease outlives the last Client handle (it keeps the client alive) and releases
  // when it goes.
  std::optional<Lease> lease;
  {
    Client client = Client::open(masters.uri(), redlock_options(30s));
    lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(*lease);
  }
  EXPECT_EQ(masters.holding("g", "x").size(), 3u) << "released while the Lease was alive";
  lease.reset();
  EXPECT_TRUE(no_grant_keys(masters)) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockCleanup, AcquireThatFailedForWantOfAQuorumLeavesNothingOnTheLiveMasters) {
  RedisMasters masters(5);
  const RedlockParams params;
  Client client = Client::open(masters.uri(params.query()), redlock_options());
  for (int i : {0, 2, 4}) masters.server(i).kill9();
  fails_with(Errc::unavailable,
             [&] { (void)client.lock("g", "x").acquire(Mode::exclusive, Wait::none()); });
  fails_with(Errc::unavailable,
             [&] { (void)client.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(300ms)); });
  EXPECT_EQ(masters.up_masters(), (std::vector<int>{1, 3}));
  EXPECT_TRUE(masters.grant_keys().empty()) << "the failed acquires left keys on the live masters:"
                                            << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
