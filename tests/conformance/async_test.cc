// Conformance: asynchronous acquires (warden/async.h, docs/async.md) on every engine —
// the outcome told exactly once off the caller's thread, and a wait that runs out or is
// cancelled leaving nothing behind, as a blocking one's.
#include "warden/async.h"

#include <atomic>
#include <future>
#include <memory>
#include <thread>

#include "conformance/conformance_suite.h"
#include "support/async_outcome.h"

namespace warden::conformance {
namespace {

using testing::AsyncOutcome;

TEST_P(Conformance, AsyncAcquireIsToldOnceOffTheCallersThreadAndACancelAfterChangesNothing) {
  Client client = open_client();
  AsyncOutcome outcome;
  AcquireHandle handle =
      client.lock(group(), "x", lock_options())
          .acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), outcome.callback());
  ASSERT_TRUE(outcome.wait_for(kPatience));
  EXPECT_TRUE(handle.done());
  EXPECT_EQ(outcome.error(), nullptr);
  ASSERT_TRUE(outcome.granted());
  EXPECT_NE(outcome.thread(), std::this_thread::get_id());
  handle.cancel();  // too late: the lease stays held
  Lease lease = outcome.take();
  EXPECT_FALSE(lease.lost());
  EXPECT_FALSE(grantable("x"));
  if (capabilities().fencing) EXPECT_GT(lease.token(), 0u);
  lease.release();
  EXPECT_TRUE(freed("x"));
  EXPECT_EQ(outcome.calls(), 1);
}

// An asynchronous try (Wait::none()) is granted a free lock and told "not granted" for a
// held one, leaving nothing, as the blocking try.
TEST_P(Conformance, AsyncTryIsGrantedAFreeLockAndNotAHeldOne) {
  AsyncOutcome free_try, held_try;  // before the Clients, whose waits tell them
  Client client = open_client();
  Client other = open_client();
  AcquireHandle first = client.lock(group(), "x", lock_options())
                            .acquire_async(Mode::exclusive, Wait::none(), free_try.callback());
  ASSERT_TRUE(free_try.wait_for(kPatience));
  EXPECT_EQ(free_try.error(), nullptr);
  ASSERT_TRUE(free_try.granted()) << "an asynchronous try of a free lock was not granted";
  Lease lease = free_try.take();

  AcquireHandle second = other.lock(group(), "x", lock_options())
                             .acquire_async(Mode::exclusive, Wait::none(), held_try.callback());
  ASSERT_TRUE(held_try.wait_for(kPatience));
  EXPECT_EQ(held_try.error(), nullptr);
  EXPECT_FALSE(held_try.granted()) << "an asynchronous try was granted a held lock";
  lease.release();
  EXPECT_TRUE(freed("x")) << "the try of the held lock left something behind";
}

// Three asynchronous waiters behind a holder: one runs out, one is cancelled, one is
// granted at the holder's release. The two that ended leave nothing on the backend: once
// the third has released too, the lock is free.
TEST_P(Conformance, AsyncWaitsEndByTimeoutCancelOrTheHoldersReleaseAndLeaveNothing) {
  Client holder = open_client();
  Client waiter = open_client();
  Lease held = holder.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = waiter.lock(group(), "x", lock_options());
  AsyncOutcome granted, ran_out, cancelled;
  AcquireHandle first =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), granted.callback());
  ASSERT_TRUE(queue_reaches("x", 1));
  lock.acquire_async(Mode::exclusive, Wait::up_to(300ms), ran_out.callback());
  AcquireHandle third =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), cancelled.callback());
  ASSERT_TRUE(ran_out.wait_for(kPatience));
  EXPECT_EQ(ran_out.error(), nullptr);
  EXPECT_FALSE(ran_out.granted());
  third.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience));
  EXPECT_EQ(cancelled.error(), nullptr);
  EXPECT_FALSE(cancelled.granted());
  EXPECT_EQ(granted.calls(), 0) << "granted while the holder holds";

  held.release();
  ASSERT_TRUE(granted.wait_for(kPatience));
  ASSERT_TRUE(granted.granted()) << "the first waiter was not granted at the release";
  Lease lease = granted.take();
  lease.release();
  EXPECT_TRUE(freed("x")) << "a waiter that ran out or was cancelled left something behind";
  EXPECT_EQ(granted.calls() + ran_out.calls() + cancelled.calls(), 3);
  EXPECT_TRUE(first.done());
}

// The Client closed (its last handle dropped) with waits in flight: each wait keeps what
// it needs of the Client until it ends (docs/async.md), so a grant made later still comes
// with a working Lease, and a wait cancelled later is still told, once.
TEST_P(Conformance, AClientDroppedWithWaitsInFlightStillTellsEachWaitOnce) {
  Client holder = open_client();
  Lease held = holder.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AsyncOutcome granted, cancelled;
  AcquireHandle to_cancel;
  {
    Client waiter = open_client();
    Lock lock = waiter.lock(group(), "x", lock_options());
    lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), granted.callback());
    ASSERT_TRUE(queue_reaches("x", 1));
    to_cancel = lock.acquire_async(Mode::exclusive, Wait::forever(), cancelled.callback());
    ASSERT_TRUE(queue_reaches("x", 2));
  }  // the waiter's Client and Lock are gone
  to_cancel.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience));
  EXPECT_EQ(cancelled.error(), nullptr);
  EXPECT_FALSE(cancelled.granted());
  held.release();
  ASSERT_TRUE(granted.wait_for(kPatience));
  EXPECT_EQ(granted.error(), nullptr);
  Lease lease = granted.take();
  ASSERT_TRUE(lease) << "the wait of a dropped Client was not granted";
  EXPECT_FALSE(grantable("x"));
  lease.release();
  EXPECT_TRUE(freed("x"));
  EXPECT_EQ(granted.calls(), 1);
  EXPECT_EQ(cancelled.calls(), 1);
}

// The Client's last handle dropped with one wait in flight, which then ends without a
// grant (cancelled, or run out): the wait held the last of the Client, which closes once
// the wait's end is told, on whichever thread let go of it last. It is told once, and
// nothing is left behind. (etcd:// once closed its gRPC channels there while a call of
// theirs was still held on gRPC's thread: gRPC freed its callback queue twice.)
TEST_P(Conformance, AClientDroppedWithItsOnlyWaitEndingUngrantedClosesOnce) {
  Client holder = open_client();
  Lease held = holder.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  // Several rounds: the wait's end races the engine's thread letting go of it.
  for (int round = 0; round < 6; ++round) {
    const bool cancel = round % 2 == 0;
    AsyncOutcome ended;
    AcquireHandle handle;
    {
      Client waiter = open_client();
      handle = waiter.lock(group(), "x", lock_options())
                   .acquire_async(Mode::exclusive,
                                  cancel ? Wait::forever() : Wait::up_to(500ms),
                                  ended.callback());
      // A wait to cancel is cancelled once queued; one that runs out may be over already.
      if (cancel) ASSERT_TRUE(queue_reaches("x", 1)) << "round " << round;
    }  // the wait holds the rest of the Client
    if (cancel) handle.cancel();
    ASSERT_TRUE(ended.wait_for(kPatience)) << "round " << round;
    EXPECT_EQ(ended.error(), nullptr) << "round " << round;
    EXPECT_FALSE(ended.granted()) << "round " << round;
    ASSERT_TRUE(queue_reaches("x", 0)) << "round " << round << ": the wait left its request";
    EXPECT_EQ(ended.calls(), 1);
  }
  held.release();
  EXPECT_TRUE(freed("x"));
}

// The Client's last handle dropped while a release sent with release_async is under way:
// the release keeps what it needs of the Client until it is told, is told once, and the
// Client then closes on a thread of its own choosing, not on one of its engine's (where
// closing the engine would wait for that very thread). The lock is free afterwards.
TEST_P(Conformance, AClientDroppedWithAnAsyncReleaseInFlightTellsItOnce) {
  struct Told {
    std::promise<std::exception_ptr> error;
    std::atomic<int> calls{0};
  };
  // Several rounds: the drop must come while the release is under way, and how long that
  // is depends on the engine.
  for (int round = 0; round < 5; ++round) {
    auto told = std::make_shared<Told>();
    auto told_future = told->error.get_future();
    {
      Client client = open_client();
      Lease lease =
          client.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
      ASSERT_TRUE(lease);
      lease.release_async([told](std::exception_ptr e) {
        if (++told->calls == 1) told->error.set_value(e);
      });
    }  // the Client's last handle: the release under way holds the rest
    ASSERT_EQ(told_future.wait_for(kPatience), std::future_status::ready) << "round " << round;
    EXPECT_EQ(told_future.get(), nullptr);
    EXPECT_TRUE(freed("x")) << "round " << round;
    EXPECT_EQ(told->calls.load(), 1);
  }
}

// Lease::release_async: a count that is not the hold's last is told at once and leaves the
// lock held; the last is told once the backend has confirmed it, so the lock is free
// for anyone by then. Each is told once, off the caller's thread.
TEST_P(Conformance, AnAsyncReleaseIsToldOnceTheBackendConfirmedIt) {
  Client client = open_client();
  Lock lock = client.lock(group(), "x", lock_options());
  Lease outer = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(outer);
  Lease inner = lock.acquire(Mode::exclusive, Wait::none());  // the same hold, counted twice
  ASSERT_TRUE(inner);

  struct Told {
    std::promise<std::exception_ptr> error;
    std::atomic<int> calls{0};
    std::thread::id thread;
    Lease::ReleaseCallback callback() {
      return [this](std::exception_ptr e) {
        thread = std::this_thread::get_id();
        if (++calls == 1) error.set_value(e);
      };
    }
  } first, last;
  auto first_told = first.error.get_future();
  inner.release_async(first.callback());
  EXPECT_FALSE(inner.valid());
  ASSERT_EQ(first_told.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(first_told.get(), nullptr);
  EXPECT_FALSE(grantable("x")) << "a count that was not the last let the lock go";

  auto last_told = last.error.get_future();
  outer.release_async(last.callback());
  EXPECT_FALSE(outer.valid());
  ASSERT_EQ(last_told.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(last_told.get(), nullptr);
  EXPECT_TRUE(grantable("x")) << "told released before the backend had let the lock go";
  EXPECT_NE(last.thread, std::this_thread::get_id());
  EXPECT_EQ(first.calls + last.calls, 2);
}

}  // namespace
}  // namespace warden::conformance
