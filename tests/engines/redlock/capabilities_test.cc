// redlock:// offers exclusive, non-fair locks with fencing, durable tokens and check;
// nothing else. Asking for shared mode, FIFO fairness or a lock-delay fails with
// unsupported before anything reaches a master.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(RedlockCapabilities, ExclusiveNonFairFencedDurableAndCheckable) {
  RedisMasters masters(3);
  const Capabilities caps = Client::open(masters.uri(), redlock_options()).capabilities();
  EXPECT_FALSE(caps.shared);
  EXPECT_FALSE(caps.fair);
  EXPECT_TRUE(caps.non_fair);
  EXPECT_FALSE(caps.lock_delay);
  EXPECT_TRUE(caps.fencing);
  EXPECT_TRUE(caps.durable_tokens);
  EXPECT_TRUE(caps.check);
}

TEST(RedlockCapabilities, SharedFairAndLockDelayFailWithUnsupportedBeforeAnyIo) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options());
  fails_with(Errc::unsupported,
             [&] { (void)client.lock("g", "x").acquire(Mode::shared, Wait::none()); });
  fails_with(Errc::unsupported, [&] { (void)client.lock("g", "x").try_lock_shared(); });

  // An explicit FIFO request is refused; the default (automatic) is the engine's own order.
  LockOptions fifo = redlock_options().lock_defaults;
  fifo.fairness = Fairness::fifo;
  fails_with(Errc::unsupported,
             [&] { (void)client.lock("g", "x", fifo).acquire(Mode::exclusive, Wait::none()); });

  LockOptions delayed = redlock_options().lock_defaults;
  delayed.lock_delay = 100ms;
  fails_with(Errc::unsupported,
             [&] { (void)client.lock("g", "x", delayed).acquire(Mode::exclusive, Wait::none()); });

  for (int i = 0; i < masters.size(); ++i) {
    EXPECT_TRUE(masters.command(i, {"KEYS", "*"}).empty()) << "m" << i << " was written to";
  }
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(lease) << "the refused calls left something behind";
  lease.release();

  // A client opened without saying anything about fairness locks: automatic is non-fair.
  Client defaults = Client::open(masters.uri());
  EXPECT_EQ(defaults.capabilities().resolve(Fairness::automatic), Fairness::non_fair);
  EXPECT_TRUE(defaults.lock("g", "x").try_lock());
  defaults.lock("g", "x").unlock();
}

}  // namespace
}  // namespace warden::testing
