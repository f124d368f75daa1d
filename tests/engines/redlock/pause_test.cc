// redlock:// with masters frozen by SIGSTOP: the kernel still accepts and buffers
// their commands, nobody answers. One frozen master does not stop a round (it is not
// waited for beyond the round's bound) and the lock works on the others; a frozen majority fails a
// try with unavailable within its attempts, and a held lease is reported lost within its TTL. The
// commands a frozen master runs when it thaws may set a stale grant key; it is gone within the TTL.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
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

TEST(RedlockPause, OneFrozenMasterDoesNotStopAnAcquire) {
  RedisMasters masters(5);
  const RedlockParams params;
  const ClientOptions options = redlock_options(2s);
  Client client = Client::open(masters.uri(params.query()), options);
  // The pool has a connection to every master already.
  client.lock("g", "warm-up").acquire(Mode::exclusive, Wait::none()).release();

  masters.server(0).pause();
  const auto started = Clock::now();
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  const auto took = Clock::now() - started;
  // A grant at all means the votes ended within the lease's validity: the round did not
  // wait for the frozen master beyond its bound.
  ASSERT_TRUE(held) << "4 of 5 masters answered, but no grant";
  std::printf("granted in %.3f s with one master frozen (node timeout %lld ms)\n", seconds(took),
              static_cast<long long>(params.node_timeout.count()));
  EXPECT_EQ(masters.holding("g", "x"), (std::vector<int>{1, 2, 3, 4}));

  // Renewals keep going on the other four.
  std::this_thread::sleep_for(options.lock_defaults.ttl);
  EXPECT_FALSE(held.lost()) << "4 of 5 masters renew: a quorum";
  EXPECT_EQ(masters.holding("g", "x"), (std::vector<int>{1, 2, 3, 4}));

  // Thawed, master 0 runs what it buffered (the SET NX among it): a key of ours may
  // appear there. Released, and at the latest one TTL later, nothing is left anywhere.
  masters.server(0).resume();
  const auto released = Clock::now();
  held.release();
  EXPECT_TRUE(no_grant_keys(masters, options.lock_defaults.ttl + kPrompt))
      << "left " << seconds(Clock::now() - released)
      << " s after the release:" << describe_keys(masters.grant_keys());
}

TEST(RedlockPause, ARoundWaitsForAFrozenMasterAtMostATenthOfTheTtl) {
  RedisMasters masters(5);
  RedlockParams params;
  // Far longer than ttl/10 (the TTL sets the bound) and than any slowness of the
  // machine: a round that waited out the node timeout would show.
  params.node_timeout = 20'000ms;
  const ClientOptions options = redlock_options(1s);
  Client client = Client::open(masters.uri(params.query()), options);
  client.lock("g", "warm-up").acquire(Mode::exclusive, Wait::none()).release();

  masters.server(4).pause();
  const auto started = Clock::now();
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  const auto took = Clock::now() - started;
  ASSERT_TRUE(held);
  std::printf("granted in %.3f s with one master frozen (node timeout 20 s, ttl 1 s)\n",
              seconds(took));
  EXPECT_LT(took, params.node_timeout) << "the round waited out the node timeout, not ttl/10";
  const auto releasing = Clock::now();
  held.release();
  EXPECT_LT(Clock::now() - releasing, params.node_timeout)
      << "the release waited out the node timeout, not ttl/10";
  masters.server(4).resume();
  EXPECT_TRUE(no_grant_keys(masters, options.lock_defaults.ttl + kPrompt))
      << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockPause, FrozenMajorityFailsATryWithUnavailableWithinItsAttempts) {
  RedisMasters masters(5);
  const RedlockParams params;
  const ClientOptions options = redlock_options(2s);
  Client client = Client::open(masters.uri(params.query()), options);
  Lock lock = client.lock("g", "x");
  lock.acquire(Mode::exclusive, Wait::none()).release();  // warm the pool

  for (int i : {0, 1, 2}) masters.server(i).pause();
  auto took =
      fails_with(Errc::unavailable, [&] { (void)lock.acquire(Mode::exclusive, Wait::none()); });
  std::printf("a try with 3 of 5 masters frozen failed in %.3f s (bound %.3f s)\n", seconds(took),
              seconds(params.try_bound()));
  EXPECT_LT(took, params.try_bound()) << "frozen masters held the try past its attempts";
  took = fails_with(Errc::unavailable,
                    [&] { (void)lock.acquire(Mode::exclusive, Wait::up_to(500ms)); });
  std::printf("a 0.5 s wait with 3 of 5 masters frozen failed in %.3f s\n", seconds(took));
  EXPECT_LT(took, 500ms + params.wait_overrun());
  EXPECT_TRUE(masters.grant_keys().empty())
      << "failed acquires left grant keys on the live masters:"
      << describe_keys(masters.grant_keys());

  // Thawed, the masters run the SET NX they buffered; those keys expire with the TTL,
  // and the lock is granted again.
  for (int i : {0, 1, 2}) masters.server(i).resume();
  EXPECT_TRUE(no_grant_keys(masters, options.lock_defaults.ttl + kPrompt))
      << "left:" << describe_keys(masters.grant_keys());
  Lease lease;
  ASSERT_TRUE(eventually(
      [&] {
        try {
          lease = lock.acquire(Mode::exclusive, Wait::none());
        } catch (const Error&) {
          // a connection that timed out may need a call to be replaced
        }
        return lease.valid();
      },
      kPrompt))
      << "no grant after the masters thawed";
  lease.release();
  EXPECT_TRUE(no_grant_keys(masters)) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockPause, HeldLeaseIsLostWithinItsTtlWhenAMajorityFreezes) {
  RedisMasters masters(5);
  const RedlockParams params;
  const ClientOptions options = redlock_options(1s);
  const auto ttl = options.lock_defaults.ttl;
  Client holder = Client::open(masters.uri(params.query()), options);
  Client other = Client::open(masters.uri(params.query()), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint64_t first_token = held.token();
  std::atomic<Clock::rep> lost_at{0};
  held.on_lost([&] { lost_at = Clock::now().time_since_epoch().count(); });
  std::this_thread::sleep_for(500ms);  // renewals got through
  ASSERT_FALSE(held.lost());

  for (int i : {2, 3, 4}) masters.server(i).pause();
  const auto paused = Clock::now();
  const bool lost_in_time =
      eventually([&] { return held.lost_token().stop_requested(); }, ttl + kPrompt);
  const auto waited = Clock::now() - paused;
  for (int i : {2, 3, 4}) masters.server(i).resume();
  ASSERT_TRUE(lost_in_time) << "renewals failed for " << seconds(waited)
                            << " s but the lease was never reported lost";
  ASSERT_TRUE(eventually([&] { return lost_at.load() != 0; }, kPrompt)) << "on_lost did not run";
  const Clock::time_point lost{Clock::duration(lost_at.load())};
  std::printf("lost %.3f s after 3 of 5 masters froze (TTL 1 s)\n", seconds(lost - paused));
  EXPECT_LE(lost - paused, ttl + 100ms)
      << "the loss was reported after the masters could have let the grant go";
  EXPECT_NO_THROW(held.release());

  // The masters let the grant go too (a renewal a thawed master runs late may stretch
  // it there by up to one more TTL); the next grant has a larger token.
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(2 * ttl + kPrompt));
  ASSERT_TRUE(next) << "the lost grant is still held:" << describe_keys(masters.grant_keys());
  EXPECT_GT(next.token(), first_token);
  next.release();
  EXPECT_TRUE(no_grant_keys(masters, ttl + kPrompt))
      << "left:" << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
