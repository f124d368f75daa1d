// redlock:// Client::inspect and Client::list beyond the conformance clauses
// (tests/conformance/status_test.cc): a key on a minority of masters is not a holder, a
// quorum's is; too few masters is unavailable; reading changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

TEST(RedlockInspect, AKeyOnAMinorityIsNotAHolder) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options());
  masters.plant("g", "n", {0}, "someone:7", 10s);
  EXPECT_TRUE(client.inspect("g", "n").holders.empty());
  EXPECT_TRUE(client.list("g").empty());
  // Planted on a quorum, with its token: that is a holder.
  masters.plant("g", "n", {0, 1}, "someone:7", 10s);
  const LockStatus s = client.inspect("g", "n");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].token, 7u);
}

TEST(RedlockInspect, TooFewMastersIsUnavailableAndReadingChangesNothing) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto before = masters.lock_keys("g", "n");
  for (int i = 0; i < 3; ++i) (void)client.inspect("g", "n");
  (void)client.list("g");
  EXPECT_EQ(masters.lock_keys("g", "n"), before);
  EXPECT_TRUE(client.check(held.sequencer()));

  masters.server(1).kill9();
  masters.server(2).kill9();
  fails_with(Errc::unavailable, [&] { (void)client.inspect("g", "n"); });
  fails_with(Errc::unavailable, [&] { (void)client.list("g"); });
}

}  // namespace
}  // namespace warden::testing
