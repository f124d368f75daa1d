// A Lease moved to another thread and released there, while the thread that acquired it
// acquires the same lock again. That thread's reentrancy hold is the one being released:
// it must never be counted on it (a grant nobody renews and whose loss nobody signals),
// but wait for the release and take a fresh grant.
//
// The race window is the release's round trip, so the test runs against a real wardend
// and repeats until the re-acquire has landed inside that window many times over.
#include <gtest/gtest.h>

#include <chrono>
#include <latch>
#include <thread>

#include "support/server_process.h"
#include "warden/client.h"
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

}  // namespace
}  // namespace warden
