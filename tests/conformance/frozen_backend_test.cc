// A frozen backend: every process of it stopped (SIGSTOP), as a long GC pause, a VM
// migration or a dead disk stops a server. Connections stay open and nothing answers,
// which no timeout of the operating system notices. A lock call must still come back
// on its own bound: a timed acquire by its deadline plus op_timeout (granted it cannot
// be: it returns empty or throws), a cancelled one within op_timeout of the cancel,
// release() and check() within op_timeout (per server a call asks in turn: etcd://'s
// failover gives each member of a cluster the whole op_timeout). Once the backend runs
// again everything works and nothing is left held.
//
// Asynchronous waits (warden/async.h) are held to the same bounds as blocking ones.
//
// The clause freezes a backend of its own (GetParam().start()), never the one the
// process's other cases share.
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>

#include "conformance/conformance_suite.h"
#include "support/async_outcome.h"
#include "warden/async.h"
#include "warden/sequencer.h"

namespace warden::conformance {
namespace {

// What each bound is given beyond the contract's for a loaded machine, per server the
// call waits for in turn: each of those waits ends at a deadline the client's threads
// must wake for (a 3-member etcd cluster's check() took 4.23 s for 3 s of op_timeout
// beside a make test's builds).
constexpr Clock::duration kSlack = 1s;
constexpr Clock::duration kOpTimeout = 1s;
constexpr Clock::duration kWait = 2s;

// Runs `f` on a thread of its own; the future says when it ended. What it returned or
// threw does not matter here (a frozen backend may make either right).
template <class F>
std::future<Clock::time_point> ends(F f) {
  return std::async(std::launch::async, [f = std::move(f)]() mutable {
    try {
      (void)f();
    } catch (const std::exception&) {
    }
    return Clock::now();
  });
}

// One call made while the backend is frozen, and its bound.
struct Bounded {
  const char* what;
  std::future<Clock::time_point>* call;
  Clock::time_point from;
  Clock::time_point bound;
};

TEST_P(Conformance, AFrozenBackendHoldsNoCallPastItsBound) {
  std::unique_ptr<Backend> own = GetParam().start();
  ClientOptions options;
  options.op_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(kOpTimeout);
  // A short lease, so that whatever a frozen call could not settle runs out soon after.
  const LockOptions lock = lock_options_with_ttl(3s);
  Client holder = open_client_on(*own, options);
  Client timed_client = open_client_on(*own, options);
  Client cancelled_client = open_client_on(*own, options);
  Client checker = open_client_on(*own, options);
  Lease held = holder.lock(group(), "x", lock).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const Sequencer sequencer = held.sequencer();

  // The waits to be cancelled first, then the timed ones (blocking and asynchronous,
  // warden/async.h, held to the same bounds), each pair queued on the backend (where it
  // keeps a queue the test can read) before the next.
  std::stop_source stop;
  auto cancelled = ends([&] {
    return cancelled_client.lock(group(), "x", lock)
        .acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  });
  testing::AsyncOutcome timed_async, cancelled_async;
  AcquireHandle async_wait = cancelled_client.lock(group(), "x", lock)
                                 .acquire_async(Mode::exclusive, Wait::forever(),
                                                cancelled_async.callback());
  EXPECT_TRUE(eventually([&] {
    const auto waiting = own->queued(group(), "x");
    return !waiting || *waiting == 2;
  })) << "the waits to be cancelled did not queue";
  const auto timed_from = Clock::now();
  auto timed = ends([&] {
    return timed_client.lock(group(), "x", lock).acquire(Mode::exclusive, Wait::up_to(kWait));
  });
  timed_client.lock(group(), "x", lock)
      .acquire_async(Mode::exclusive, Wait::up_to(kWait), timed_async.callback());
  // A timed wait may run out before the other has queued on a slow machine: its bound
  // holds already then, and the freeze still finds the rest under way.
  EXPECT_TRUE(eventually([&] {
    const auto waiting = own->queued(group(), "x");
    return !waiting || *waiting == 4 ||
           timed.wait_for(0s) == std::future_status::ready || timed_async.calls() > 0;
  })) << "the timed waits did not queue";

  if (!own->freeze()) {
    stop.request_stop();
    async_wait.cancel();
    held.release();
    // Their callbacks write to these outcomes: told before the clause returns, and a
    // Lease given back at once, so that the other timed waiter is not kept waiting.
    EXPECT_TRUE(timed_async.wait_for(kPatience));
    timed_async.take();
    EXPECT_TRUE(cancelled_async.wait_for(kPatience));
    timed.wait();
    cancelled.wait();
    GTEST_SKIP() << GetParam().name << " has no process to freeze";
  }
  std::this_thread::sleep_for(200ms);  // the waiters' calls are under way on a frozen server
  stop.request_stop();
  async_wait.cancel();
  const auto cancelled_at = Clock::now();
  auto released = ends([&] {
    held.release();
    return 0;
  });
  auto checked = ends([&] { return checker.check(sequencer); });

  const Bounded calls[] = {
      {"a timed acquire (bound: its deadline + op_timeout)", &timed, timed_from,
       timed_from + kWait + kOpTimeout + kSlack},
      {"a cancelled acquire (bound: op_timeout after its cancel)", &cancelled, cancelled_at,
       cancelled_at + kOpTimeout + kSlack},
      {"release() (bound: op_timeout per server asked in turn)", &released, cancelled_at,
       cancelled_at + own->servers_asked_in_turn() * (kOpTimeout + kSlack)},
      {"check() (bound: op_timeout per server asked in turn)", &checked, cancelled_at,
       cancelled_at + own->servers_asked_in_turn() * (kOpTimeout + kSlack)},
  };
  for (const Bounded& c : calls) c.call->wait_until(c.bound);
  const bool timed_async_told =
      timed_async.wait_for(timed_from + kWait + kOpTimeout + kSlack - Clock::now());
  const bool cancelled_async_told =
      cancelled_async.wait_for(cancelled_at + kOpTimeout + kSlack - Clock::now());
  own->thaw();  // before any call is waited for further: a failing clause ends too
  EXPECT_TRUE(timed_async_told) << "an asynchronous timed wait was not told by its deadline + "
                                   "op_timeout";
  EXPECT_TRUE(cancelled_async_told) << "a cancelled asynchronous wait was not told within "
                                       "op_timeout of its cancel";
  EXPECT_TRUE(timed_async.wait_for(kPatience));
  EXPECT_TRUE(cancelled_async.wait_for(kPatience));
  EXPECT_EQ(timed_async.calls(), 1);
  EXPECT_EQ(cancelled_async.calls(), 1);
  timed_async.take();  // whatever they got goes back before the lock is asked for again
  cancelled_async.take();
  for (const Bounded& c : calls) {
    const auto ended = c.call->get();
    EXPECT_LE(ended, c.bound)
        << c.what << " returned "
        << std::chrono::duration_cast<std::chrono::milliseconds>(ended - c.from).count()
        << " ms after it began (the backend stayed frozen until the bound)";
  }

  // Everything works again. A release() the frozen backend could not confirm threw and
  // left the lease held (docs/contract.md): the holder releases it again, as a user
  // would, retrying while the error says to (unavailable, deadline_exceeded: the client
  // is still reconnecting). Nothing the frozen calls left behind is held for long (a
  // waiter's entry runs out with its liveness TTL, a lease that could not be renewed
  // with its own), so a new client is granted the lock.
  if (held) {
    EXPECT_TRUE(eventually(
        [&] {
          try {
            held.release();
            return true;
          } catch (const Error& e) {
            if (e.code() != Errc::unavailable && e.code() != Errc::deadline_exceeded) {
              ADD_FAILURE() << "release() after the backend thawed: " << e.what();
              return true;
            }
            return false;
          }
        },
        kLongDeadline, 100ms))
        << "release() kept failing after the backend thawed";
  }
  // The clients whose calls the freeze cut short close first. On a ZooKeeper ensemble
  // frozen whole, a request node whose delete the freeze cut short was seen (on a loaded
  // machine only) to outlive the thaw until its client closed: an open defect, not what
  // this clause pins down. What it holds every engine to is that nothing stays held once
  // those clients are gone.
  for (Client* gone : {&timed_client, &cancelled_client, &holder, &checker}) {
    Client closing = std::move(*gone);
  }
  // With the suite's op_timeout: a backend just thawed on a loaded machine may take more
  // than the 1 s above to answer its first calls, which says nothing of the frozen ones.
  Client after = open_client_on(*own);
  Lease again = after.lock(group(), "x", lock).acquire(Mode::exclusive, Wait::up_to(kLongDeadline));
  EXPECT_TRUE(again) << "the lock was still held after the backend thawed";
  if (again) EXPECT_NO_THROW(again.release());
}

}  // namespace
}  // namespace warden::conformance
