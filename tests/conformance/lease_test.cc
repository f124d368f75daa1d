// Conformance: leases, the watchdog and the lost signal (DESIGN §2 "Lease").
#include <atomic>
#include <chrono>
#include <exception>
#include <stop_token>
#include <thread>

#include "conformance/conformance_suite.h"

namespace warden::conformance {
namespace {

TEST_P(Conformance, LeaseWithoutWatchdogIsLostByItsTtlBeforeAnotherClientIsGranted) {
  Client holder = open_client_without_renewals();
  Client next = open_client();
  const LockOptions options = lock_options_with_ttl(400ms);

  const auto before = Clock::now();
  Lease lease = holder.lock(group(), "x", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_FALSE(lease.lost());

  Flag token_fired;
  std::stop_callback on_token(lease.lost_token(), [&] { token_fired.set(); });
  Flag callback_ran;
  lease.on_lost([&] { callback_ran.set(); });

  // Blocks until the backend hands the lock over, which it may do once the lease ended.
  Lease successor = next.lock(group(), "x").acquire(Mode::exclusive, Wait::up_to(kPatience));
  const auto granted_at = Clock::now();
  ASSERT_TRUE(successor) << "the expired lease was never handed over";
  // Declared lost no later than the moment another client could be granted.
  EXPECT_TRUE(lease.lost()) << "another client holds the lock, the old lease is not lost";
  EXPECT_TRUE(lease.lost_token().stop_requested());
  ASSERT_TRUE(token_fired.is_set());
  EXPECT_LE(token_fired.set_at(), granted_at);
  EXPECT_GE(granted_at, before + options.ttl - kClockSlack) << "handed over before the TTL";
  // Lost by the TTL on the client's clock, not absurdly early. (How late is bounded by
  // the hand-over above: a loss must be told before another client is granted.)
  EXPECT_GE(token_fired.set_at(), before + options.ttl / 2);
  ASSERT_TRUE(callback_ran.wait_for(kPatience)) << "the on_lost callback did not run";

  // A callback set after the loss runs at once, on the caller's thread.
  const auto caller = std::this_thread::get_id();
  std::thread::id ran_on;
  lease.on_lost([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, caller);

  // Releasing a lost lease is a no-op on the backend and does not throw.
  EXPECT_NO_THROW(lease.release());
  EXPECT_FALSE(lease.valid());
  EXPECT_FALSE(grantable("x")) << "releasing the lost lease released the successor's grant";
}

TEST_P(Conformance, WatchdogRenewsLeaseAcrossSeveralTtls) {
  Client holder = open_client();
  LockOptions options = lock_options();
  // Renewed every 2 s, so a renewal may run 4 s late and still be in time. (With 1.2 s,
  // 2 s, 3 s and 4 s, etcd's keep-alives on a machine whose two cores were taken by
  // ctest's shards and the builds beside them came later than the TTL's slack: the lease
  // was rightly reported lost, and the clause said nothing of renewals.)
  options.ttl = 6000ms;

  Lease lease = holder.lock(group(), "x", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  std::atomic<bool> callback_ran{false};
  lease.on_lost([&] { callback_ran = true; });

  // Two TTLs pass; the lock stays held throughout.
  const auto until = Clock::now() + 2 * options.ttl;
  int probes = 0;
  while (Clock::now() < until) {
    EXPECT_FALSE(grantable("x", Mode::exclusive, options)) << "the lease ran out while held";
    ++probes;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_GE(probes, 4);
  EXPECT_FALSE(lease.lost());
  EXPECT_FALSE(lease.lost_token().stop_requested());
  EXPECT_FALSE(callback_ran);
  if (capabilities().check) {
    EXPECT_TRUE(holder.check(lease.sequencer()));
  }

  lease.release();
  EXPECT_FALSE(callback_ran) << "a normal release fired the lost callback";
  EXPECT_TRUE(freed("x"));
}

TEST_P(Conformance, DroppedGrantIsLostWithinARenewIntervalAndNeverRenewedBack) {
  ClientOptions fast_renewals = client_options();
  fast_renewals.renew_interval = 200ms;
  Client holder = open_client(fast_renewals);
  LockOptions options = lock_options();
  // Long against the renew interval, so a loss noticed by a renewal is told apart from
  // one that merely ran out the lease, even when renewals run late.
  options.ttl = 2 * std::chrono::duration_cast<std::chrono::milliseconds>(kPatience);

  const auto before = Clock::now();
  Lease lease = holder.lock(group(), "x", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const Sequencer seq = lease.sequencer();
  Flag lost;
  std::stop_callback on_token(lease.lost_token(), [&] { lost.set(); });

  bool can_drop = false;
  try {
    can_drop = backend().drop_grants(group(), "x");
  } catch (const std::exception& e) {
    FAIL() << "dropping the grant behind the client's back failed: " << e.what();
  }
  if (!can_drop) {
    GTEST_SKIP() << GetParam().name << " cannot drop grants behind a client's back";
  }
  ASSERT_TRUE(lost.wait_for(options.ttl)) << "the holder never noticed its grant was gone";
  // The lease itself could not have run out before `before + ttl`: a loss told earlier
  // was noticed by a renewal.
  EXPECT_LT(lost.set_at(), before + options.ttl)
      << "noticed only by the lease running out, not by a renewal";
  EXPECT_TRUE(lease.lost());

  // Some renew intervals later, the lost grant has not been renewed back.
  std::this_thread::sleep_for(3 * fast_renewals.renew_interval);
  EXPECT_TRUE(lease.lost());
  if (capabilities().check) {
    EXPECT_FALSE(holder.check(seq));
  }
  Client next = open_client();
  Lease successor = next.lock(group(), "x", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(successor) << "the dropped grant still blocks the lock";
  std::this_thread::sleep_for(2 * fast_renewals.renew_interval);
  if (capabilities().check) {
    EXPECT_FALSE(holder.check(seq));
    EXPECT_TRUE(next.check(successor.sequencer()));
  }
  lease.release();  // a no-op for a lost lease; must not free the successor's grant
  EXPECT_FALSE(grantable("x", Mode::exclusive, options));
}

}  // namespace
}  // namespace warden::conformance
