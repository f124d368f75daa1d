// The watchdog tells a loss before the backend may grant the lock again, also when it
// wakes late, as it does on a machine with more runnable threads than cores. Here the
// lateness is made on purpose: another lease's on_lost callback holds the watchdog's
// thread for 10 ms just before the loss (a callback should not; a scheduler can). mem://
// shares the client's clock and grants the waiter the moment the lease ends on the
// table, so nothing but the loss margin (core/watchdog.h) stands between the two.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::fails_with;

// The holder's client: no renewals, so its leases run out.
Client holder_without_renewals(const std::string& uri) {
  ClientOptions options;
  options.watchdog = false;
  return Client::open(uri, options);
}

LockOptions short_lease() {
  LockOptions lock;
  lock.ttl = 400ms;
  return lock;
}

TEST(LateWatchdog, ALossToldByAWatchdogThatWakesLateStillPrecedesTheRegrant) {
  Client holder = holder_without_renewals("mem://late-watchdog");
  Client next = Client::open("mem://late-watchdog");
  const LockOptions lock = short_lease();
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

// However late the watchdog's thread is, a lease reads as lost once another client can
// have its lock: lost() looks at the lease's own deadline. Here that thread is held by
// the first lease's callback, which blocks until the test lets it go, before the second
// lease is even taken: the second runs out while nobody can declare it, and is lost all
// the same; its own callback runs once the thread is free.
TEST(LateWatchdog, ALeaseReadsAsLostAtItsDeadlineWhileTheWatchdogsThreadIsHeld) {
  Client holder = holder_without_renewals("mem://held-watchdog");
  Client next = Client::open("mem://held-watchdog");
  const LockOptions lock = short_lease();
  std::promise<void> let_go;
  std::shared_future<void> free_to_go = let_go.get_future().share();
  std::atomic<bool> first_told{false};
  Lease first = holder.lock("g", "a", lock).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(first);
  first.on_lost([&, free_to_go] {
    first_told = true;
    free_to_go.wait_for(30s);  // bounded: a failing case must still end
  });
  ASSERT_TRUE(eventually([&] { return first_told.load(); }, 10s))
      << "the watchdog never told the first loss";

  Lease second = holder.lock("g", "b", lock).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(second);
  std::atomic<bool> second_told{false};
  second.on_lost([&] { second_told = true; });
  Lease taken = next.lock("g", "b").acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(taken);
  EXPECT_TRUE(second.lost()) << "another client holds b, and its old lease does not read as lost";
  EXPECT_FALSE(second_told.load()) << "the watchdog's thread was not held: nothing is shown";
  // Everything else treats it as lost too: a re-acquire by its thread does not count on
  // it, and its release sends nothing.
  (void)fails_with(Errc::lost, [&] {
    (void)holder.lock("g", "b", lock).acquire(Mode::exclusive, Wait::none());
  });
  EXPECT_NO_THROW(second.release());
  EXPECT_FALSE(second_told.load());

  // Released, it is still told lost once the watchdog's thread is free.
  let_go.set_value();
  EXPECT_TRUE(eventually([&] { return second_told.load(); }, 10s)) << "the second loss was never told";
}

}  // namespace
}  // namespace warden
