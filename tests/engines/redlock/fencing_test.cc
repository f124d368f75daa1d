// redlock:// fencing tokens: large (floored at a master's clock in microseconds),
// named in every master's grant key ("OWNER:TOKEN"), backed by a fence counter that
// outlives the grant by up to one TTL (token_expiry_test.cc: then it goes), and increasing across
// grants of different clients and across a restart of every master with its append-only file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
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

std::uint64_t wall_clock_us() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(RedlockFencing, TokensAreFlooredAtTheClockAndNamedInEveryGrantKey) {
  RedisMasters masters(5);
  const ClientOptions options = redlock_options(10s);
  Client a = Client::open(masters.uri(), options);
  Client b = Client::open(masters.uri(), options);

  const std::uint64_t before = wall_clock_us();
  Lease lease = a.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const std::uint64_t token = lease.token();
  // The masters run on this machine's clock; a second of slack for rounding.
  EXPECT_GE(token, before - 1'000'000) << "the token is not floored at the masters' clock (µs)";

  const auto grant = masters.read(grant_key("g", "x"));
  ASSERT_EQ(grant.size(), 5u);
  for (const auto& k : grant) {
    ASSERT_TRUE(k.value) << "m" << k.master << " has no grant key";
    EXPECT_TRUE(ends_with(*k.value, ":" + std::to_string(token)))
        << "m" << k.master << ": grant key '" << *k.value << "' does not name token " << token;
    EXPECT_EQ(*k.value, *grant.front().value) << "the masters name different owners";
    EXPECT_GT(k.pttl, 0) << "m" << k.master;
    EXPECT_LE(k.pttl, 10'000) << "m" << k.master;
  }

  // The fence counter: an integer on (at least) a quorum of masters, expiring within
  // the TTL, and at least the token it fenced.
  const auto fences = masters.read(fence_key("g", "x"));
  int counters = 0;
  std::uint64_t highest = 0;
  for (const auto& k : fences) {
    if (!k.value) continue;
    ++counters;
    EXPECT_GT(k.pttl, 0) << "m" << k.master << ": the fence counter has no expiry";
    EXPECT_LE(k.pttl, 10'000) << "m" << k.master << ": the fence counter outlives the TTL";
    highest = std::max<std::uint64_t>(highest, std::stoull(*k.value));
  }
  EXPECT_GE(counters, masters.quorum()) << "fence counters on too few masters";
  EXPECT_GE(highest, token) << "no master's fence counter reached the token it gave";

  lease.release();
  EXPECT_TRUE(masters.grant_keys().empty()) << describe_keys(masters.grant_keys());
  int kept = 0;
  for (const auto& k : masters.read(fence_key("g", "x"))) kept += k.value ? 1 : 0;
  EXPECT_EQ(kept, counters) << "fence counters went away with the grant";

  Lease next = b.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  Lease other = b.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(other) << "another lock of the group";
  EXPECT_GE(other.token(), before - 1'000'000);
}

TEST(RedlockFencing, GrantsAndTokensSurviveARestartOfEveryMasterWithPersistence) {
  RedisOptions persistent;
  persistent.persistence = true;
  RedisMasters masters(3, persistent);
  const ClientOptions options = redlock_options(10s);
  Client holder = Client::open(masters.uri(), options);

  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint64_t first = held.token();

  // Every master killed and restarted well within the TTL: the grant is still there.
  for (int i = 0; i < masters.size(); ++i) masters.server(i).kill9();
  for (int i = 0; i < masters.size(); ++i) masters.server(i).start();
  EXPECT_EQ(masters.holding("g", "x"), (std::vector<int>{0, 1, 2}))
      << "the grant did not survive the restart";
  Client other = Client::open(masters.uri(), options);
  EXPECT_FALSE(other.lock("g", "x").acquire(Mode::exclusive, Wait::none()))
      << "granted twice across a restart";
  EXPECT_TRUE(other.check(held.sequencer()));

  // The holder's renewals reach the restarted masters; it keeps and releases its lease.
  std::this_thread::sleep_for(options.lock_defaults.ttl / 3 + 500ms);
  EXPECT_FALSE(held.lost());
  held.release();
  EXPECT_TRUE(no_grant_keys(masters)) << "left:" << describe_keys(masters.grant_keys());

  // Restarted once more, the counters still fence: the next token is larger.
  for (int i = 0; i < masters.size(); ++i) masters.server(i).kill9();
  for (int i = 0; i < masters.size(); ++i) masters.server(i).start();
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), first);
  const std::uint64_t second = next.token();
  next.release();
  Lease third = holder.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(third);
  EXPECT_GT(third.token(), second);
  third.release();
  EXPECT_TRUE(no_grant_keys(masters)) << "left:" << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
