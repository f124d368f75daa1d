// redlock:// Client::check: true while a quorum of masters holds the grant the
// sequencer names, in its mode (exclusive, the only one redlock:// grants); false once
// it was released, replaced by a later grant, or deleted behind the engine's back —
// and a grant deleted that way is reported lost at the next renewal.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/sequencer.h"

namespace warden::testing {
namespace {

TEST(RedlockCheck, TrueWhileHeldFalseAfterReleaseAndForAnOlderGrant) {
  RedisMasters masters(5);
  Client a = Client::open(masters.uri(), redlock_options());
  Client b = Client::open(masters.uri(), redlock_options());
  Lease lease = a.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const Sequencer first = lease.sequencer();
  EXPECT_TRUE(a.check(first));
  EXPECT_TRUE(b.check(first)) << "check is a question to the masters, not to the client";
  EXPECT_TRUE(b.check(first.str()));
  Sequencer wrong_token = first;
  wrong_token.token += 1;
  EXPECT_FALSE(b.check(wrong_token)) << "a token the grant does not have";
  Sequencer other_lock = first;
  other_lock.name = "y";
  EXPECT_FALSE(b.check(other_lock));
  Sequencer other_mode = first;
  other_mode.mode = Mode::shared;
  EXPECT_FALSE(b.check(other_mode)) << "an exclusive grant's token checked as a shared grant";

  lease.release();
  EXPECT_FALSE(a.check(first));
  EXPECT_FALSE(b.check(first));

  Lease next = b.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_FALSE(a.check(first)) << "the older grant's sequencer checks against the newer grant";
  EXPECT_TRUE(a.check(next.sequencer()));
  next.release();
}

TEST(RedlockCheck, TrueWhileAQuorumHoldsTheGrantFalseOnceAMajorityLostIt) {
  RedisMasters masters(5);
  Client client = Client::open(masters.uri(), redlock_options(30s));
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const std::string key = grant_key("g", "x");
  for (int i : {0, 1}) ASSERT_EQ(masters.command(i, {"DEL", key}), "1");
  EXPECT_TRUE(client.check(lease.sequencer())) << "3 of 5 masters still hold the grant";
  ASSERT_EQ(masters.command(2, {"DEL", key}), "1");
  EXPECT_FALSE(client.check(lease.sequencer())) << "2 of 5 masters hold the grant: no quorum";
}

TEST(RedlockCheck, DroppedGrantChecksFalseAndIsLostAtTheNextRenewal) {
  RedisMasters masters(3);
  ClientOptions options = redlock_options(3s);
  options.renew_interval = 300ms;
  Client holder = Client::open(masters.uri(), options);
  Client other = Client::open(masters.uri(), options);
  Lease lease = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  ASSERT_TRUE(holder.check(lease.sequencer()));
  const Sequencer dropped = lease.sequencer();

  ASSERT_EQ(masters.drop("g", "x"), 3);
  EXPECT_FALSE(holder.check(lease.sequencer()));
  EXPECT_FALSE(other.check(lease.sequencer()));
  EXPECT_TRUE(eventually([&] { return lease.lost(); }, options.renew_interval + kPrompt))
      << "every master says the grant is not ours, but the lease was not reported lost";
  EXPECT_NO_THROW(lease.release());

  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next) << "the dropped grant still blocks the lock";
  EXPECT_GT(next.token(), dropped.token);
  EXPECT_TRUE(other.check(next.sequencer()));
  EXPECT_FALSE(other.check(dropped));
  next.release();
}

}  // namespace
}  // namespace warden::testing
