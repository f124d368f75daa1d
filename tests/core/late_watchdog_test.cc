// The watchdog tells a loss before the backend may grant the lock again, also when it
// wakes late, as it does on a machine with more runnable threads than cores. Here the
// lateness is made on purpose: another lease's on_lost callback holds the watchdog's
// thread for 10 ms just before the loss (a callback should not; a scheduler can). mem://
// shares the client's clock and grants the waiter the moment the lease ends on the
// table, so nothing but the loss margin (core/watchdog.h) stands between the two.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden {
namespace {

using namespace std::chrono_literals;

TEST(LateWatchdog, ALossToldByAWatchdogThatWakesLateStillPrecedesTheRegrant) {
  ClientOptions without_renewals;
  without_renewals.watchdog = false;  // the leases run out
  Client holder = Client::open("mem://late-watchdog", without_renewals);
  Client next = Client::open("mem://late-watchdog");
  LockOptions lock;
  lock.ttl = 400ms;
  Lease first = holder.lock("g", "a", lock).acquire(Mode::exclusive, Wait::none());
  std::this_thread::sleep_for(2ms);
  Lease second = holder.lock("g", "b", lock).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);
  first.on_lost([] { std::this_thread::sleep_for(10ms); });
  std::atomic<Clock::rep> second_lost_at{0};
  second.on_lost([&] { second_lost_at = Clock::now().time_since_epoch().count(); });

  Lease taken = next.lock("g", "b").acquire(Mode::exclusive, Wait::up_to(5s));
  const auto granted_at = Clock::now();
  ASSERT_TRUE(taken);
  ASSERT_NE(second_lost_at.load(), 0) << "b was granted to another client before its holder "
                                         "was told the lease was lost";
  EXPECT_LE(Clock::time_point(Clock::duration(second_lost_at.load())), granted_at);
}

}  // namespace
}  // namespace warden
