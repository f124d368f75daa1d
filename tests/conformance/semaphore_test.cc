// SemaphoreConformance: k of N permits, with the lock's leases, tokens and FIFO.
#include "warden/semaphore.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "conformance/semaphore_suite.h"
#include "support/async_outcome.h"

namespace warden::conformance {
namespace {

// An engine test executable that has no semaphores does not instantiate this suite.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SemaphoreConformance);

TEST_P(SemaphoreConformance, ReportsSemaphoresAsPinned) {
  EXPECT_TRUE(capabilities().semaphore) << "instantiate this suite only where pinned";
  EXPECT_TRUE(reported_capabilities().semaphore);
}

TEST_P(SemaphoreConformance, RequestForNTakesNPermitsAndItsReleaseGivesThemBack) {
  Client a = open_client();
  Client b = open_client();
  Semaphore sa = a.semaphore(group(), "s", 4, lock_options());
  Semaphore sb = b.semaphore(group(), "s", 4, lock_options());
  Lease three = sa.acquire(3, Wait::none());
  ASSERT_TRUE(three);
  EXPECT_EQ(three.permits(), 3u);
  EXPECT_EQ(three.mode(), Mode::shared);
  EXPECT_FALSE(sb.acquire(2, Wait::none())) << "3 held + 2 > 4";
  Lease one = sb.acquire(1, Wait::none());
  ASSERT_TRUE(one) << "3 held + 1 fits";
  EXPECT_FALSE(sb.acquire(1, Wait::none())) << "all 4 held";
  three.release();
  Lease again = sb.acquire(3, Wait::none());
  EXPECT_TRUE(again) << "the released 3 are free again";
}

TEST_P(SemaphoreConformance, TokensIncreaseAcrossTheSemaphoresGrants) {
  Client a = open_client();
  Client b = open_client();
  Semaphore sa = a.semaphore(group(), "s", 2, lock_options());
  Semaphore sb = b.semaphore(group(), "s", 2, lock_options());
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    Lease x = sa.acquire(1, Wait::none());
    Lease y = sb.acquire(1, Wait::none());
    ASSERT_TRUE(x && y);
    EXPECT_GT(x.token(), last);
    EXPECT_GT(y.token(), x.token()) << "held at once, granted later";
    last = y.token();
  }
}

TEST_P(SemaphoreConformance, NotReentrantOneThreadAcquiringTwiceHoldsTwoGrants) {
  Client a = open_client();
  Semaphore s = a.semaphore(group(), "s", 2, lock_options());
  Lease first = s.acquire(1, Wait::none());
  Lease second = s.acquire(1, Wait::none());
  ASSERT_TRUE(first && second);
  EXPECT_NE(first.token(), second.token());
  EXPECT_FALSE(s.acquire(1, Wait::none())) << "two grants use both permits";
  first.release();
  EXPECT_TRUE(second) << "releasing one grant leaves the other";
  EXPECT_TRUE(s.acquire(1, Wait::none()));
}

TEST_P(SemaphoreConformance, NeverMoreHoldersThanPermitsUnderLoad) {
  constexpr std::uint32_t kPermits = 3;
  constexpr int kThreads = 8;
  constexpr int kCycles = 25;
  std::vector<Client> clients{open_client(), open_client()};
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> cycles{0};
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        Semaphore s = clients[t % 2].semaphore(group(), "s", kPermits, lock_options());
        for (int i = 0; i < kCycles; ++i) {
          Lease lease = s.acquire(1, Wait::up_to(kPatience * 2));
          if (!lease) {
            ++failures;
            continue;
          }
          const int now_inside = ++inside;
          int seen = most.load();
          while (now_inside > seen && !most.compare_exchange_weak(seen, now_inside)) {
          }
          std::this_thread::yield();
          --inside;
          ++cycles;
          lease.release();
        }
      });
    }
  }
  EXPECT_LE(most.load(), static_cast<int>(kPermits)) << "more holders than permits";
  EXPECT_EQ(failures.load(), 0) << "a waiter starved for " << 2 * kPatience / 1s << " s";
  EXPECT_EQ(cycles.load(), kThreads * kCycles);
  Client probe = open_client();
  EXPECT_TRUE(probe.semaphore(group(), "s", kPermits).acquire(kPermits, Wait::none()))
      << "every permit is free once all released";
}

TEST_P(SemaphoreConformance, LargeRequestIsNotPassedBySmallerOnesBehindIt) {
  WARDEN_SKIP_UNLESS(fair);
  WARDEN_SKIP_UNLESS_QUEUE();
  LockOptions fifo = lock_options();
  fifo.fairness = Fairness::fifo;
  Client a = open_client();
  Client b = open_client();
  Client c = open_client();
  Lease two = a.semaphore(group(), "s", 3, fifo).acquire(2, Wait::none());
  ASSERT_TRUE(two);
  std::atomic<bool> granted{false};
  std::jthread big([&](std::stop_token stop) {
    Lease all = b.semaphore(group(), "s", 3, fifo).acquire(3, Wait::up_to(kLongDeadline), stop);
    granted = static_cast<bool>(all);
  });
  ASSERT_TRUE(queue_reaches("s", 1));
  EXPECT_FALSE(c.semaphore(group(), "s", 3, fifo).acquire(1, Wait::none()))
      << "one permit is free, but a request for three waits before it";
  two.release();
  big.join();
  EXPECT_TRUE(granted.load());
}

TEST_P(SemaphoreConformance, AsyncPermitsAreToldOnceWhenEnoughAreFree) {
  Client a = open_client();
  Client b = open_client();
  Lease two = a.semaphore(group(), "s", 3, lock_options()).acquire(2, Wait::none());
  ASSERT_TRUE(two);
  testing::AsyncOutcome outcome;
  b.semaphore(group(), "s", 3, lock_options())
      .acquire_async(2, Wait::up_to(kLongDeadline), outcome.callback());
  ASSERT_TRUE(queue_reaches("s", 1));
  EXPECT_EQ(outcome.calls(), 0) << "two permits told while only one is free";
  two.release();
  ASSERT_TRUE(outcome.wait_for(kPatience));
  ASSERT_TRUE(outcome.granted());
  Lease granted = outcome.take();
  EXPECT_EQ(granted.permits(), 2u);
  EXPECT_EQ(outcome.calls(), 1);
}

TEST_P(SemaphoreConformance, AnotherNumberOfPermitsIsRefusedAndChangesNothing) {
  Client a = open_client();
  Client b = open_client();
  Lease held = a.semaphore(group(), "s", 4, lock_options()).acquire(1, Wait::none());
  ASSERT_TRUE(held);
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] {
    Lease other = b.semaphore(group(), "s", 5, lock_options()).acquire(1, Wait::none());
  }));
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] {
    Lease other = b.lock(group(), "s", lock_options()).acquire(Mode::exclusive, Wait::none());
  })) << "a lock of the same name is no semaphore";
  // Nothing changed: the holder still holds, and three permits are free.
  EXPECT_FALSE(held.lost());
  Lease rest = b.semaphore(group(), "s", 4, lock_options()).acquire(3, Wait::none());
  EXPECT_TRUE(rest);
  EXPECT_FALSE(b.semaphore(group(), "s", 4, lock_options()).acquire(1, Wait::none()));
}

TEST_P(SemaphoreConformance, LockHeldRefusesASemaphoreOfTheSameName) {
  Client a = open_client();
  Client b = open_client();
  Lease lock = a.lock(group(), "x", lock_options()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lock);
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] {
    Lease s = b.semaphore(group(), "x", 2, lock_options()).acquire(1, Wait::none());
  }));
  EXPECT_FALSE(lock.lost());
}

TEST_P(SemaphoreConformance, BadNumbersAreRefusedBeforeAnyIo) {
  Client a = open_client();
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { a.semaphore(group(), "s", 0); }));
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { a.semaphore(group(), "s", 1'000'001); }));
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { a.semaphore("bad/group", "s", 2); }));
  Semaphore s = a.semaphore(group(), "s", 2, lock_options());
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { Lease l = s.acquire(0); }));
  EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { Lease l = s.acquire(3); }));
  EXPECT_TRUE(s.acquire(2, Wait::none())) << "the refused requests took nothing";
}

TEST_P(SemaphoreConformance, WaitThatRunsOutLeavesNoTrace) {
  Client a = open_client();
  Client b = open_client();
  Lease all = a.semaphore(group(), "s", 2, lock_options()).acquire(2, Wait::none());
  ASSERT_TRUE(all);
  EXPECT_FALSE(b.semaphore(group(), "s", 2, lock_options()).acquire(1, Wait::up_to(100ms)));
  if (auto waiting = queued("s")) {
    EXPECT_EQ(*waiting, 0u) << "the timed-out request still waits on the backend";
  }
  all.release();
  EXPECT_TRUE(b.semaphore(group(), "s", 2, lock_options()).acquire(2, Wait::none()));
}

TEST_P(SemaphoreConformance, LeaseThatRunsOutIsLostAndItsPermitsGoToAWaiter) {
  Client holder = open_client_without_renewals();  // a process that died
  Client next = open_client();
  const LockOptions options = lock_options_with_ttl(400ms);
  const auto before = Clock::now();
  Lease lease = holder.semaphore(group(), "s", 2, options).acquire(2, Wait::none());
  ASSERT_TRUE(lease);
  const Sequencer seq = lease.sequencer();
  if (capabilities().check) {
    EXPECT_TRUE(next.check(seq)) << "a semaphore's grant checks like a shared lock's";
  }
  Lease successor = next.semaphore(group(), "s", 2).acquire(1, Wait::up_to(kPatience));
  const auto granted_at = Clock::now();
  ASSERT_TRUE(successor) << "the permits of the lapsed lease were never handed over";
  EXPECT_GE(granted_at, before + options.ttl - kClockSlack) << "handed over before the TTL";
  EXPECT_TRUE(lease.lost()) << "another client holds the permits, the old lease is not lost";
  if (capabilities().check) {
    EXPECT_FALSE(next.check(seq));
  }
  EXPECT_NO_THROW(lease.release());
  // The second permit is free. A backend that ended the lapsed holder's session (the
  // lease of postgres:// and mysql://) frees what the session held one lock at a time,
  // and a try can see some of it still taken for a moment after the successor was let
  // in: it is tried until kLongDeadline (a server on a loaded machine took longer than
  // kPatience to end that session), and an acquire that is never granted still fails.
  Semaphore again = next.semaphore(group(), "s", 2);
  EXPECT_TRUE(eventually([&] { return static_cast<bool>(again.acquire(1, Wait::none())); },
                         kLongDeadline, std::chrono::milliseconds(50)))
      << "the lapsed lease's release freed nothing, the second permit is free";
}

TEST_P(SemaphoreConformance, StatusShowsTheSemaphoreItsHoldersPermitsAndItsWaiters) {
  WARDEN_SKIP_UNLESS_QUEUE();
  Client a = open_client();
  Client b = open_client();
  Lease three = a.semaphore(group(), "s", 4, lock_options()).acquire(3, Wait::none());
  ASSERT_TRUE(three);
  std::jthread waiter([&](std::stop_token stop) {
    Lease two =
        b.semaphore(group(), "s", 4, lock_options()).acquire(2, Wait::up_to(kLongDeadline), stop);
  });
  ASSERT_TRUE(queue_reaches("s", 1));
  const LockStatus s = a.inspect(group(), "s");
  EXPECT_EQ(s.permits, 4u);
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].permits, 3u);
  EXPECT_EQ(s.holders[0].token, three.token());
  ASSERT_EQ(s.waiters.size(), 1u);
  EXPECT_EQ(s.waiters[0].permits, 2u);
  waiter.request_stop();
  waiter.join();
  three.release();
  const LockStatus free = a.inspect(group(), "s");
  EXPECT_TRUE(free.holders.empty() && free.waiters.empty());
  EXPECT_EQ(free.permits, 0u) << "an idle semaphore is forgotten";
}

}  // namespace
}  // namespace warden::conformance
