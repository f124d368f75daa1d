// redlock://'s asynchronous acquires (engines/redlock/async_retries.h): every one driven
// by one thread per Client between its attempts, however many wait; a cancel or a
// deadline is told between two attempts; a frozen majority ends a wait at its deadline
// with the error its last attempt met, as the blocking acquire does.
#include "warden/async.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/async_outcome.h"
#include "test_util.h"
#include "warden/error.h"

namespace warden::testing {
namespace {

constexpr Clock::duration kPatience = 30s;      // for what must happen, on a loaded machine
constexpr Clock::duration kLongDeadline = 60s;  // a wait that must not run out here

// 200 waits on one lock from one Client: no thread each between their attempts (the
// blocking acquire would take a thread per wait), and every one granted in turn as each
// releases (redlock:// keeps no queue: in no particular order).
TEST(RedlockAsync, ManyWaitsTakeNoThreadEachAndAreAllGrantedInTurn) {
  GrantOrder order;  // before the Clients, whose waits it is told of
  constexpr int kWaits = 200;
  AsyncOutcome first;  // before the Clients, whose waits tell it
  RedisMasters masters(3);
  const RedlockParams params;
  Client holder = Client::open(masters.uri(params.query()), redlock_options());
  Client client = Client::open(masters.uri(params.query()), redlock_options());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  // One wait first, so that the threads a first wait starts (the Client's completion
  // thread) are counted before the rest.
  Lock lock = client.lock("g", "x");
  AcquireHandle first_handle =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  std::this_thread::sleep_for(200ms);  // a few attempts refused
  const int threads_before = threads_now();

  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
  }
  std::this_thread::sleep_for(500ms);  // every wait has been refused at least once
  EXPECT_LE(threads_now(), threads_before + 1) << "the waits took threads of their own";
  EXPECT_EQ(first.calls(), 0);
  EXPECT_EQ(order.told(), 0u) << "a wait ended while the lock was held";

  held.release();
  ASSERT_TRUE(first.wait_for(kPatience));
  first.take();  // released: the others follow one by one
  EXPECT_TRUE(eventually([&] { return order.told() == kWaits; }, kPatience))
      << order.told() << " of " << kWaits << " told";
  EXPECT_TRUE(no_grant_keys(masters, kPatience)) << "left:" << describe_keys(masters.grant_keys());
}

// A wait cancelled between two attempts is told at once and leaves nothing; a try on a
// held lock is told nothing after its one attempt.
TEST(RedlockAsync, ACancelBetweenAttemptsAndATryOnAHeldLockLeaveNothing) {
  AsyncOutcome tried;      // before the Clients, whose waits tell it
  AsyncOutcome cancelled;  // before the Clients, whose waits tell it
  RedisMasters masters(3);
  const RedlockParams params;
  Client holder = Client::open(masters.uri(params.query()), redlock_options());
  Client client = Client::open(masters.uri(params.query()), redlock_options());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  AcquireHandle a =
      client.lock("g", "x").acquire_async(Mode::exclusive, Wait::none(), tried.callback());
  ASSERT_TRUE(tried.wait_for(kPatience));
  EXPECT_FALSE(tried.granted());
  EXPECT_EQ(tried.error(), nullptr);

  AcquireHandle b = client.lock("g", "x").acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline),
                                                        cancelled.callback());
  std::this_thread::sleep_for(300ms);  // several attempts refused
  EXPECT_EQ(cancelled.calls(), 0);
  b.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience));
  EXPECT_FALSE(cancelled.granted());
  EXPECT_EQ(cancelled.error(), nullptr);
  held.release();
  EXPECT_TRUE(no_grant_keys(masters)) << "left:" << describe_keys(masters.grant_keys());
}

// A majority of the masters frozen (SIGSTOP): a timed wait ends at its deadline with
// `unavailable`, the error its attempts met (as the blocking acquire's), within one
// attempt and a pause of it; a wait that started beside it on a free lock of a live
// quorum is not held up by it.
TEST(RedlockAsync, AFrozenMajorityEndsAWaitAtItsDeadlineWithUnavailable) {
  AsyncOutcome timed;  // before the Clients, whose waits tell it
  RedisMasters masters(3);
  const RedlockParams params;
  Client client = Client::open(masters.uri(params.query()), redlock_options(2s));
  client.lock("g", "warm").acquire(Mode::exclusive, Wait::none()).release();

  for (int i : {0, 1}) masters.server(i).pause();
  const auto began = Clock::now();
  AcquireHandle a =
      client.lock("g", "x").acquire_async(Mode::exclusive, Wait::up_to(1s), timed.callback());
  const bool told = timed.wait_for(1s + params.wait_overrun());
  const auto took = Clock::now() - began;
  for (int i : {0, 1}) masters.server(i).resume();
  ASSERT_TRUE(told) << "a 1 s wait outlived its bound on a frozen majority";
  EXPECT_TRUE(timed.told_error(Errc::unavailable, 0s));
  EXPECT_GE(took, 1s) << "ended before its deadline";
  EXPECT_TRUE(no_grant_keys(masters, 2s + kPrompt))
      << "left:" << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
