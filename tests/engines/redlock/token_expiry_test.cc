// redlock:// leaves nothing behind on the masters: the fence counter (":rf") lives as
// long as the grant that wrote it and is renewed with it, so an idle lock's keys are
// all gone one TTL after its last grant — and tokens of later grants still strictly
// increase, because they are floored at the masters' clocks (docs/engines/redlock.md,
// Fencing tokens).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

constexpr auto kTtl = 1000ms;

// true once no master keeps any key of ("g", name).
bool lock_gone(RedisMasters& masters, const std::string& name, Clock::duration timeout) {
  return eventually([&] { return masters.lock_keys("g", name).empty(); }, timeout);
}

TEST(RedlockTokenExpiry, IdleLockLeavesNoKeyAfterItsTtlAndTokensKeepIncreasing) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options(kTtl));
  Client other = Client::open(masters.uri(), redlock_options(kTtl));

  std::vector<std::uint64_t> tokens;
  for (int i = 0; i < 5; ++i) {
    Lease lease =
        (i % 2 == 0 ? client : other).lock("g", "x").acquire(Mode::exclusive, Wait::up_to(5s));
    ASSERT_TRUE(lease);
    tokens.push_back(lease.token());
    lease.release();
  }
  // The counter is there between grants, with an expiry no longer than the TTL.
  const auto fences = masters.read(fence_key("g", "x"));
  int counters = 0;
  for (const auto& k : fences) {
    if (!k.value) continue;
    ++counters;
    EXPECT_GT(k.pttl, 0) << "m" << k.master << ": the fence counter has no expiry";
    EXPECT_LE(k.pttl, kTtl.count()) << "m" << k.master << ": it outlives the TTL";
  }
  EXPECT_GE(counters, masters.quorum());

  // The TTL (on the masters' clocks, which are this machine's) passes: every master's
  // whole keyspace holds nothing of the lock.
  std::this_thread::sleep_for(kTtl);
  EXPECT_TRUE(lock_gone(masters, "x", 5s))
      << "left after the TTL:" << describe_keys(masters.lock_keys("g", "x"));

  // The next grants find no counter anywhere, and their tokens still rise.
  for (int i = 0; i < 3; ++i) {
    Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(5s));
    ASSERT_TRUE(lease);
    tokens.push_back(lease.token());
    lease.release();
  }
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_GT(tokens[i], tokens[i - 1]) << "grant " << i << " did not get a larger token";
  }
  EXPECT_TRUE(lock_gone(masters, "x", kTtl + 5s))
      << "left after the TTL:" << describe_keys(masters.lock_keys("g", "x"));
}

TEST(RedlockTokenExpiry, FenceCounterIsRenewedWithTheGrant) {
  RedisMasters masters(3);
  ClientOptions options = redlock_options(kTtl);
  options.renew_interval = 200ms;
  Client client = Client::open(masters.uri(), options);
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const std::uint64_t token = lease.token();

  // Held for three TTLs: the renewals keep the counter alive with the grant.
  std::this_thread::sleep_for(3 * kTtl);
  ASSERT_FALSE(lease.lost()) << "the renewals did not keep the lease";
  int counters = 0;
  for (const auto& fence : masters.fences("g", "x")) {
    if (fence && *fence >= token) ++counters;
  }
  EXPECT_GE(counters, masters.quorum()) << "the fence counter expired under a held grant";
  lease.release();

  Lease next = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  next.release();
  EXPECT_TRUE(lock_gone(masters, "x", kTtl + 5s))
      << "left after the TTL:" << describe_keys(masters.lock_keys("g", "x"));
}

}  // namespace
}  // namespace warden::testing
