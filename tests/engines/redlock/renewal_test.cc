// redlock:// renewals count only when a quorum of masters confirms them: a grant that a
// minority of masters lost (deleted behind the engine's back) is still renewed and kept;
// one that a majority lost is reported lost at the next renewal, while the masters that
// still had it let it go.
#include <gtest/gtest.h>

#include <cstdint>
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

ClientOptions renewing_options() {
  ClientOptions options = redlock_options(1500ms);
  options.renew_interval = 300ms;
  return options;
}

TEST(RedlockRenewal, GrantLostOnAMinorityOfMastersIsRenewedAndKept) {
  RedisMasters masters(5);
  const ClientOptions options = renewing_options();
  Client client = Client::open(masters.uri(), options);
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  for (int i : {0, 1}) ASSERT_EQ(masters.command(i, {"DEL", grant_key("g", "x")}), "1");

  std::this_thread::sleep_for(2 * options.lock_defaults.ttl);  // only renewals keep it
  EXPECT_FALSE(held.lost()) << "3 of 5 masters confirm the renewals: a quorum";
  const std::vector<int> still = masters.holding("g", "x");
  EXPECT_GE(still.size(), 3u) << "the grant expired on the masters that had it:"
                              << describe_masters(still);
  EXPECT_TRUE(client.check(held.sequencer()));
  held.release();
  EXPECT_TRUE(no_grant_keys(masters)) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockRenewal, GrantLostOnAMajorityOfMastersIsLostAtTheNextRenewal) {
  RedisMasters masters(5);
  const ClientOptions options = renewing_options();
  Client holder = Client::open(masters.uri(), options);
  Client other = Client::open(masters.uri(), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint64_t first_token = held.token();
  for (int i : {0, 1, 2}) ASSERT_EQ(masters.command(i, {"DEL", grant_key("g", "x")}), "1");

  EXPECT_TRUE(eventually([&] { return held.lost(); }, options.renew_interval + kPrompt))
      << "3 of 5 masters say the grant is not ours, but the lease was not reported lost";
  EXPECT_NO_THROW(held.release());
  // Another client wins the three masters that let it go: a quorum. The two that still
  // have the lost grant are not renewed any more (releasing a lost lease sends nothing),
  // so its keys there expire within a TTL.
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(kPrompt));
  ASSERT_TRUE(next) << "left:" << describe_keys(masters.grant_keys());
  EXPECT_GT(next.token(), first_token);
  next.release();
  EXPECT_TRUE(no_grant_keys(masters, options.lock_defaults.ttl + kPrompt))
      << "left:" << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
