// Conformance: modes and the ways to acquire (DESIGN §2 "Modes", "Acquire").
#include <chrono>
#include <future>
#include <stop_token>
#include <thread>
#include <utility>

#include "conformance/conformance_suite.h"

namespace warden::conformance {
namespace {

// Tries `lock` in `mode` from a thread of its own (which ends without holding anything).
bool try_from_another_thread(Lock lock, Mode mode) {
  return std::async(std::launch::async,
                    [lock = std::move(lock), mode]() mutable {
                      Lease lease = lock.acquire(mode, Wait::none());
                      return lease.valid();
                    })
      .get();
}

TEST_P(Conformance, ExclusiveHolderExcludesExclusiveFromAnotherClientAndAnotherThread) {
  Client a = open_client();
  Client b = open_client();
  Lock lock = a.lock(group(), "x");

  Lease held = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  EXPECT_GT(held.token(), 0u);
  EXPECT_EQ(held.mode(), Mode::exclusive);

  EXPECT_FALSE(b.lock(group(), "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_FALSE(b.lock(group(), "x").try_lock());
  EXPECT_FALSE(try_from_another_thread(lock, Mode::exclusive));
  EXPECT_FALSE(grantable("x"));

  held.release();
  EXPECT_TRUE(freed("x"));
}

TEST_P(Conformance, ExclusiveHolderExcludesSharedFromAnotherClientAndAnotherThread) {
  WARDEN_SKIP_UNLESS(shared);
  Client a = open_client();
  Client b = open_client();
  Lock lock = a.lock(group(), "x");

  Lease held = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  EXPECT_FALSE(b.lock(group(), "x").acquire(Mode::shared, Wait::none()));
  EXPECT_FALSE(b.lock(group(), "x").try_lock_shared());
  EXPECT_FALSE(try_from_another_thread(lock, Mode::shared));

  held.release();
  EXPECT_TRUE(freed("x", Mode::shared));
}

TEST_P(Conformance, SharedHoldersCoexistAndExcludeExclusive) {
  WARDEN_SKIP_UNLESS(shared);
  Client a = open_client();
  Client b = open_client();
  Client c = open_client();

  Lease first = a.lock(group(), "x").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(first);
  EXPECT_EQ(first.mode(), Mode::shared);
  Lease second = b.lock(group(), "x").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(second);
  // A third shared holder: another thread of client a, holding while we look.
  Holder third(a.lock(group(), "x"), Mode::shared, Wait::none());
  ASSERT_TRUE(third.wait_finished());
  ASSERT_TRUE(third.granted()) << "a shared try was refused beside shared holders";

  EXPECT_FALSE(c.lock(group(), "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_FALSE(try_from_another_thread(b.lock(group(), "x"), Mode::exclusive));

  first.release();
  second.release();
  EXPECT_FALSE(c.lock(group(), "x").try_lock()) << "one shared holder is still there";
  ASSERT_TRUE(third.release());
  EXPECT_TRUE(c.lock(group(), "x").acquire(Mode::exclusive, Wait::none()));
}

TEST_P(Conformance, TryOnBusyLockReturnsEmptyLeaseAtOnce) {
  Client a = open_client();
  Client b = open_client();
  Lease held = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = b.lock(group(), "x");

  // The holder never lets go while the tries run: a try that waited for the lock
  // would not come back before the bound.
  for (Wait wait : {Wait::none(), Wait::up_to(0ms), Wait::up_to(-5s)}) {
    EXPECT_TRUE(returns_before(kPatience, [&] {
      Lease lease = lock.acquire(Mode::exclusive, wait);
      EXPECT_FALSE(lease);
      EXPECT_FALSE(lease.valid());
    }));
  }
  EXPECT_TRUE(returns_before(kPatience, [&] { EXPECT_FALSE(lock.try_lock()); }));
  EXPECT_EQ(lock.token(), 0u);
  EXPECT_FALSE(grantable("x"));
}

TEST_P(Conformance, TimedTryLockTimesOutAndReturnsFalse) {
  Client a = open_client();
  Client b = open_client();
  Lease held = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = b.lock(group(), "x");
  constexpr auto d = 300ms;

  auto start = Clock::now();
  EXPECT_FALSE(lock.try_lock_for(d));
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, d - kClockSlack);
  EXPECT_LT(waited, d + kPatience);

  start = Clock::now();
  EXPECT_FALSE(lock.try_lock_until(Clock::now() + d));
  waited = Clock::now() - start;
  EXPECT_GE(waited, d - kClockSlack);
  EXPECT_LT(waited, d + kPatience);

  // A deadline on another clock is converted, not misread.
  start = Clock::now();
  EXPECT_FALSE(lock.try_lock_until(std::chrono::system_clock::now() + d));
  waited = Clock::now() - start;
  EXPECT_GE(waited, d - kClockSlack);
  EXPECT_LT(waited, d + kPatience);

  start = Clock::now();
  EXPECT_FALSE(lock.acquire(Mode::exclusive, Wait::up_to(d)));
  waited = Clock::now() - start;
  EXPECT_GE(waited, d - kClockSlack);
  EXPECT_LT(waited, d + kPatience);
  EXPECT_EQ(lock.token(), 0u);
}

TEST_P(Conformance, TimedTryLockSharedTimesOutAndReturnsFalse) {
  WARDEN_SKIP_UNLESS(shared);
  Client a = open_client();
  Client b = open_client();
  Lease held = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = b.lock(group(), "x");
  constexpr auto d = 300ms;

  auto start = Clock::now();
  EXPECT_FALSE(lock.try_lock_shared_for(d));
  auto waited = Clock::now() - start;
  EXPECT_GE(waited, d - kClockSlack);
  EXPECT_LT(waited, d + kPatience);

  start = Clock::now();
  EXPECT_FALSE(lock.try_lock_shared_until(std::chrono::system_clock::now() + d));
  waited = Clock::now() - start;
  EXPECT_GE(waited, d - kClockSlack);
  EXPECT_LT(waited, d + kPatience);
}

TEST_P(Conformance, WaitUntilInThePastIsATry) {
  Client a = open_client();
  Client b = open_client();
  Lock lock = b.lock(group(), "x");
  const auto past = Clock::now() - 1s;

  {
    Lease held = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(held);
    EXPECT_TRUE(returns_before(
        kPatience, [&] { EXPECT_FALSE(lock.acquire(Mode::exclusive, Wait::until(past))); }));
    held.release();  // confirmed before b tries
  }
  // On a free lock the same call is granted: it is a try, not a refusal.
  EXPECT_TRUE(lock.acquire(Mode::exclusive, Wait::until(past)));
  EXPECT_TRUE(lock.try_lock_until(std::chrono::system_clock::now() - 1s));
  lock.unlock();
}

TEST_P(Conformance, BlockingAcquireReturnsAfterRelease) {
  Client a = open_client();
  Client b = open_client();
  Lease held = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  Holder waiter(b.lock(group(), "x"), Mode::exclusive, Wait::forever());
  // Where the queue can be read, the waiter is seen waiting before the release.
  ASSERT_TRUE(queue_reaches("x", 1));
  ASSERT_FALSE(waiter.finished()) << "granted while another client held the lock";

  const auto released_at = Clock::now();
  held.release();
  ASSERT_TRUE(waiter.wait_granted()) << "not granted within kPatience after release";
  EXPECT_GE(waiter.granted_at(), released_at);
  EXPECT_GT(waiter.token(), 0u);
  EXPECT_FALSE(grantable("x"));
  EXPECT_TRUE(waiter.release());
  EXPECT_TRUE(freed("x"));
}

TEST_P(Conformance, StopTokenCancelsBlockingWaitPromptly) {
  Client a = open_client();
  Client b = open_client();
  Lease held = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] {
    return b.lock(group(), "x").acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  });
  ASSERT_TRUE(queue_reaches("x", 1));
  ASSERT_NE(waiter.wait_for(0s), std::future_status::ready)
      << "the blocking acquire returned while the lock was held";

  // The holder keeps the lock: only the stop_token can end this wait.
  stop.request_stop();
  ASSERT_EQ(waiter.wait_for(kPatience), std::future_status::ready)
      << "the wait did not end after its stop_token was signalled";
  EXPECT_FALSE(waiter.get()) << "a cancelled wait must return an empty Lease";
  EXPECT_TRUE(queue_reaches("x", 0)) << "the cancelled wait left its request queued";

  // A token that is already signalled does not wait at all.
  std::stop_source already;
  already.request_stop();
  EXPECT_TRUE(returns_before(kPatience, [&] {
    EXPECT_FALSE(
        b.lock(group(), "x").acquire(Mode::exclusive, Wait::forever(), already.get_token()));
  }));
}

TEST_P(Conformance, TimedOutOrCancelledWaiterLeavesNoTrace) {
  Client a = open_client();
  Client timed = open_client();
  Client cancelled = open_client();
  Client late = open_client();
  Lease held = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  EXPECT_FALSE(timed.lock(group(), "x").acquire(Mode::exclusive, Wait::up_to(300ms)));

  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] {
    return cancelled.lock(group(), "x").acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  });
  ASSERT_TRUE(queue_reaches("x", 1));
  ASSERT_NE(waiter.wait_for(0s), std::future_status::ready);
  stop.request_stop();
  ASSERT_EQ(waiter.wait_for(kPatience), std::future_status::ready);
  EXPECT_FALSE(waiter.get());

  held.release();
  // No stale waiter entry is left ahead of a newcomer: a plain try gets the lock.
  Lease next = late.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(next) << "a timed-out or cancelled waiter still blocks the lock";
  next.release();
  // ...and the clients that gave up are not stuck with a half-made request either.
  Lease after_timeout = timed.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(after_timeout);
  after_timeout.release();  // confirmed before the next client tries
  EXPECT_TRUE(cancelled.lock(group(), "x").acquire(Mode::exclusive, Wait::none()));
}

TEST_P(Conformance, TimedOutExclusiveWaiterNoLongerBlocksLaterSharedRequests) {
  WARDEN_SKIP_UNLESS(shared);
  WARDEN_SKIP_UNLESS(fair);
  LockOptions fair = lock_options();
  fair.fairness = Fairness::fifo;
  Client reader = open_client();
  Client writer = open_client();
  Client later = open_client();
  Lease held = reader.lock(group(), "x", fair).acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(held);

  // The exclusive waiter gives up once by its deadline and once by cancellation.
  EXPECT_FALSE(writer.lock(group(), "x", fair).acquire(Mode::exclusive, Wait::up_to(300ms)));
  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] {
    return writer.lock(group(), "x", fair)
        .acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  });
  ASSERT_TRUE(queue_reaches("x", 1));
  ASSERT_NE(waiter.wait_for(0s), std::future_status::ready);
  stop.request_stop();
  ASSERT_EQ(waiter.wait_for(kPatience), std::future_status::ready);
  EXPECT_FALSE(waiter.get());

  // Nothing queues ahead of a new shared request any more: it joins the holder at once.
  Lease joined = later.lock(group(), "x", fair).acquire(Mode::shared, Wait::none());
  EXPECT_TRUE(joined) << "a gone exclusive waiter still holds shared requests back";
}

}  // namespace
}  // namespace warden::conformance
