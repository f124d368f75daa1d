// Conformance: client-side reentrancy and the standard Lockable interface (DESIGN §2
// "Reentrancy"; warden/lock.h has the state table).
#include <future>
#include <mutex>
#include <shared_mutex>

#include "conformance/conformance_suite.h"

namespace warden::conformance {
namespace {

TEST_P(Conformance, ExclusiveReacquireFromSameThreadSharesTheGrantUntilLastRelease) {
  Client a = open_client();
  Lock lock = a.lock(group(), "x");

  Lease first = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(first);
  // Re-entry is answered by the client: even a try succeeds at once.
  Lease second = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(second);
  Lease third = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(third) << "another Lock object of the same client and thread re-enters too";
  EXPECT_EQ(second.token(), first.token());
  EXPECT_EQ(third.token(), first.token());
  EXPECT_EQ(lock.token(), first.token());

  first.release();
  EXPECT_FALSE(grantable("x")) << "released on the backend before the last count";
  third.release();
  EXPECT_FALSE(grantable("x")) << "released on the backend before the last count";
  second.release();
  EXPECT_TRUE(freed("x")) << "not released on the backend after the last count";
  EXPECT_EQ(lock.token(), 0u);
}

TEST_P(Conformance, SharedReacquireFromSameThreadSharesTheGrantUntilLastRelease) {
  WARDEN_SKIP_UNLESS(shared);
  Client a = open_client();
  Lock lock = a.lock(group(), "x");

  Lease first = lock.acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(first);
  Lease second = lock.acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(second);
  EXPECT_EQ(second.token(), first.token());
  EXPECT_EQ(second.mode(), Mode::shared);

  first.release();
  EXPECT_FALSE(grantable("x", Mode::exclusive));
  second.release();
  EXPECT_TRUE(freed("x", Mode::exclusive));
}

TEST_P(Conformance, SharedReacquireUnderExclusiveIsCountedOnTheExclusiveGrant) {
  WARDEN_SKIP_UNLESS(shared);
  Client a = open_client();
  Lock lock = a.lock(group(), "x");

  Lease exclusive = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(exclusive);
  Lease shared = lock.acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared.token(), exclusive.token());
  EXPECT_EQ(shared.mode(), Mode::shared);               // the count's mode...
  EXPECT_EQ(shared.sequencer().mode, Mode::exclusive);  // ...the grant's mode

  exclusive.release();
  // The grant is still exclusive: others get neither mode.
  EXPECT_FALSE(grantable("x", Mode::shared));
  EXPECT_FALSE(grantable("x", Mode::exclusive));
  shared.release();
  EXPECT_TRUE(freed("x", Mode::exclusive));
}

TEST_P(Conformance, ExclusiveReacquireUnderSharedThrowsWouldDeadlockAtOnce) {
  WARDEN_SKIP_UNLESS(shared);
  Client a = open_client();
  Lock lock = a.lock(group(), "x");
  Lease shared = lock.acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);

  // It can never succeed, so it must not wait out the long deadline it was given (the
  // calls run on this thread: the shared hold is this thread's).
  auto start = Clock::now();
  EXPECT_TRUE(throws_error(Errc::would_deadlock, [&] {
    (void)lock.acquire(Mode::exclusive, Wait::up_to(kLongDeadline));
  }));
  EXPECT_LT(Clock::now() - start, kLongDeadline) << "it can never succeed, so it must not wait";
  EXPECT_TRUE(throws_error(Errc::would_deadlock,
                           [&] { (void)lock.acquire(Mode::exclusive, Wait::none()); }));
  EXPECT_TRUE(throws_error(Errc::would_deadlock, [&] { (void)lock.try_lock(); }));
  start = Clock::now();
  EXPECT_TRUE(throws_error(Errc::would_deadlock, [&] { (void)lock.try_lock_for(kLongDeadline); }));
  EXPECT_LT(Clock::now() - start, kLongDeadline) << "it can never succeed, so it must not wait";

  // The refused call changed nothing: the shared hold is intact and releases normally.
  EXPECT_FALSE(grantable("x", Mode::exclusive));
  shared.release();
  EXPECT_TRUE(lock.acquire(Mode::exclusive, Wait::none()));
}

TEST_P(Conformance, NewThreadDoesNotReenterHoldOfThreadThatEnded) {
  Client a = open_client();
  Lock lock = a.lock(group(), "x");
  // A worker thread acquires and hands its Lease over, then ends.
  Lease handed_over = std::async(std::launch::async, [lock]() mutable {
                        return lock.acquire(Mode::exclusive, Wait::none());
                      }).get();
  ASSERT_TRUE(handed_over);

  // New threads of the same client are other threads, even where the system reuses the
  // ended thread's id for them: none of them may re-enter the hold.
  for (int i = 0; i < 20; ++i) {
    const bool entered = std::async(std::launch::async, [lock]() mutable {
                           Lease lease = lock.acquire(Mode::exclusive, Wait::none());
                           return lease.valid();
                         }).get();
    ASSERT_FALSE(entered) << "thread " << i << " re-entered another thread's exclusive hold";
  }
  handed_over.release();
  EXPECT_TRUE(freed("x"));
}

TEST_P(Conformance, LockWorksWithStdUniqueLock) {
  Client a = open_client();
  Lock lock = a.lock(group(), "x");
  {
    std::unique_lock guard(lock);
    EXPECT_TRUE(guard.owns_lock());
    EXPECT_GT(lock.token(), 0u);
    EXPECT_FALSE(grantable("x"));
  }
  EXPECT_EQ(lock.token(), 0u);
  EXPECT_TRUE(freed("x"));

  std::unique_lock deferred(lock, std::defer_lock);
  EXPECT_TRUE(deferred.try_lock_for(kPatience));
  EXPECT_FALSE(grantable("x"));
  deferred.unlock();
  EXPECT_TRUE(freed("x"));
}

TEST_P(Conformance, LockWorksWithStdSharedLock) {
  WARDEN_SKIP_UNLESS(shared);
  Client a = open_client();
  Lock lock = a.lock(group(), "x");
  {
    std::shared_lock guard(lock);
    EXPECT_TRUE(guard.owns_lock());
    EXPECT_GT(lock.token(), 0u);
    EXPECT_FALSE(grantable("x", Mode::exclusive));
    EXPECT_TRUE(freed("x", Mode::shared));
  }
  EXPECT_TRUE(freed("x", Mode::exclusive));

  std::shared_lock deferred(lock, std::defer_lock);
  EXPECT_TRUE(deferred.try_lock_for(kPatience));
  EXPECT_FALSE(grantable("x", Mode::exclusive));
  deferred.unlock();
  EXPECT_TRUE(freed("x", Mode::exclusive));
}

TEST_P(Conformance, LocksWorkWithStdScopedLock) {
  Client a = open_client();
  Lock first = a.lock(group(), "first");
  Lock second = a.lock(group(), "second");
  {
    std::scoped_lock guard(first, second);
    EXPECT_FALSE(grantable("first"));
    EXPECT_FALSE(grantable("second"));
  }
  EXPECT_TRUE(freed("first"));
  EXPECT_TRUE(freed("second"));
}

TEST_P(Conformance, LockableCallsMixWithAcquire) {
  Client a = open_client();
  Lock lock = a.lock(group(), "x");
  lock.lock();
  Lease inner = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner.token(), lock.token());
  inner.release();
  EXPECT_FALSE(grantable("x")) << "lock() still holds a count";
  lock.unlock();
  EXPECT_TRUE(freed("x"));
}

TEST_P(Conformance, UnlockByThreadHoldingNothingThrowsNotOwner) {
  Client a = open_client();
  Lock lock = a.lock(group(), "x");
  EXPECT_TRUE(throws_error(Errc::not_owner, [&] { lock.unlock(); }));
  if (capabilities().shared) {
    EXPECT_TRUE(throws_error(Errc::not_owner, [&] { lock.unlock_shared(); }));
  }

  lock.lock();
  // Another thread of the same client holds nothing, so it cannot unlock this hold.
  auto other = std::async(std::launch::async, [lock]() mutable {
    return throws_error(Errc::not_owner, [&] { lock.unlock(); });
  });
  EXPECT_TRUE(other.get());
  EXPECT_FALSE(grantable("x")) << "a refused unlock() released the lock";
  lock.unlock();
  EXPECT_TRUE(freed("x"));
  EXPECT_TRUE(throws_error(Errc::not_owner, [&] { lock.unlock(); })) << "one unlock too many";
}

}  // namespace
}  // namespace warden::conformance
