// A Lease moved to another thread and released there, while the thread that acquired it
// acquires the same lock again. That thread's reentrancy hold is the one being released:
// it must never be counted on it (a grant nobody renews and whose loss nobody signals),
// but wait for the release and take a fresh grant.
//
// The race window is the release's round trip, so the test runs against a real wardend
// and repeats until the re-acquire has landed inside that window many times over.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <latch>
#include <thread>

#include "support/server_process.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden {
namespace {

using namespace std::chrono_literals;

constexpr int kRounds = 400;

TEST(MovedLease, ReacquireDuringItsReleaseOnAnotherThreadTakesAFreshGrant) {
  testing::Wardend server;
  Client client = Client::open(server.uri());
  Lock lock = client.lock("moved", "lease");

  int raced = 0;  // rounds where the re-acquire began while the release was in flight
  for (int round = 0; round < kRounds; ++round) {
    Lease first = lock.acquire(Mode::exclusive, Wait::up_to(5s));
    ASSERT_TRUE(first) << "round " << round;
    const std::uint64_t first_token = first.token();

    std::latch start(2);
    std::thread releaser([&start, moved = std::move(first)]() mutable {
      start.arrive_and_wait();
      moved.release();
    });
    start.arrive_and_wait();
    Lease second = lock.acquire(Mode::exclusive, Wait::up_to(5s));
    releaser.join();

    ASSERT_TRUE(second) << "round " << round;
    // Whatever the interleaving, the second Lease is a grant the backend holds now.
    EXPECT_FALSE(second.lost()) << "round " << round;
    EXPECT_TRUE(client.check(second.sequencer()))
        << "round " << round << ": the re-acquire was counted on a released grant";
    if (second.token() != first_token) ++raced;
    second.release();
    if (HasFailure()) break;
  }
  // The interleaving must actually have been exercised, or the test proves nothing.
  EXPECT_GT(raced, 0) << "no round re-acquired after the release began";
  RecordProperty("fresh_grants", raced);
}

// The other way a release can settle: the backend does not confirm it. The moved Lease's
// release reports the failure and the Lease keeps its count; the owning thread, which
// waited meanwhile, then counts on that same grant rather than taking a second one. The
// unconfirmed RELEASE may still reach the server once it thaws (it was sent): then the
// grant is gone, and the watchdog's next renewal must tell both Leases so.
TEST(MovedLease, ReacquireDuringAFailedReleaseCountsOnTheGrantThatStaysHeld) {
  testing::Wardend server;
  ClientOptions options;
  options.op_timeout = 300ms;
  options.renew_interval = 200ms;
  options.lock_defaults.ttl = 30s;
  Client client = Client::open(server.uri(), options);
  Lock lock = client.lock("moved", "failed-release");
  Lease first = lock.acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(first);
  const std::uint64_t token = first.token();

  server.process().signal(SIGSTOP);  // the release will not be confirmed
  std::atomic<bool> release_failed{false};
  std::latch releasing(1);
  // The releasing thread keeps the Lease (a failed release leaves it held), so it
  // outlives the thread: dropping it would hand the release to the background instead.
  Lease moved = std::move(first);
  std::thread releaser([&] {
    releasing.count_down();
    try {
      moved.release();
    } catch (const Error&) {
      release_failed = true;  // reported; the Lease keeps its count
    }
  });
  releasing.wait();
  std::this_thread::sleep_for(50ms);  // let the release reach the frozen server
  Lease second;
  try {
    second = lock.acquire(Mode::exclusive, Wait::up_to(5s));
  } catch (const Error& e) {
    ADD_FAILURE() << "the re-acquire failed: " << e.what();
  }
  releaser.join();
  server.process().signal(SIGCONT);

  ASSERT_TRUE(release_failed) << "the release was confirmed by a frozen server";
  ASSERT_TRUE(second);
  EXPECT_EQ(second.token(), token) << "a second grant while the first is still held";
  // Either the grant is still the backend's, or its loss is told: never a Lease on a
  // grant that is gone and not lost.
  EXPECT_TRUE(testing::eventually([&] {
    return second.lost() || client.check(second.sequencer());
  })) << "the grant is gone on the server and nobody was told";
  if (!client.check(second.sequencer())) {
    EXPECT_TRUE(second.lost());
    EXPECT_TRUE(moved.lost());
  }
}

}  // namespace
}  // namespace warden
