// zk:// with ClientOptions::watchdog = false: nothing renews a grant, yet its session —
// kept alive by the C client's own pings — would keep the request node for as long as
// the Client lives. The client gives the lock up at the TTL it asked for, and the engine
// deletes the node right after, so the next in line gets the lock then.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(ZkWatchdogOff, GrantIsLostAtItsTtlAndItsNodeDeletedThoughTheSessionLives) {
  ZooKeeperEnsemble zk;
  ClientOptions options = with_ttl(1500ms);
  options.watchdog = false;
  const std::string uri = uri_with(zk, "session_timeout_ms=4000");
  Client client = Client::open(uri, options);
  Client other = Client::open(uri);  // watchdog on

  const auto asked = Clock::now();
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const auto granted = Clock::now();
  const std::uint64_t token = lease.token();
  std::atomic<Clock::rep> lost_at{0};
  lease.on_lost([&] { lost_at = stamp_now(); });

  auto waiting = acquire_queued(other, zk, "x", Mode::exclusive, Wait::up_to(10s));
  ASSERT_EQ(requests(zk, "g", "x"), 2u) << "the waiter did not queue";

  ASSERT_TRUE(eventually([&] { return lease.lost(); }, 1500ms + kPrompt))
      << "the grant outlived its TTL on the client";
  // The callback runs just after the lost signal fires.
  ASSERT_TRUE(eventually([&] { return lost_at.load() != 0; }, kPrompt)) << "on_lost did not run";
  // The TTL counts from the send of the listing that granted the lock: before the
  // acquire returned (and after it was asked, by the parents' creation on a new lock).
  // 100 ms for the reaper's wake-up.
  EXPECT_LE(at(lost_at) - granted, 1500ms + 100ms) << "lost after its TTL";
  EXPECT_GE(at(lost_at) - granted, 1000ms) << "lost long before its TTL";

  // The session lives (4 s, pinged by the C client), so only the engine can free the
  // lock: right after the TTL, the waiter gets it.
  ASSERT_EQ(waiting.wait_for(3s), std::future_status::ready)
      << "the waiter was not granted: the unrenewed grant's node stays"
      << describe(lock_children(zk, "g", "x"));
  const auto handed_on = Clock::now();
  Lease next = waiting.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  EXPECT_GE(handed_on - asked, 1500ms) << "the lock was handed on before the client let go";
  EXPECT_LT(handed_on - at(lost_at), kPrompt) << "the node outlived the lease by long";
  EXPECT_FALSE(client.check(lease.sequencer()));
  EXPECT_NO_THROW(lease.release());
  const std::uint64_t next_token = next.token();
  next.release();

  // The same Client still works (its session was never lost): a grant released before
  // its TTL goes at once, and is not deleted again later.
  Lease quick = client.lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(quick);
  quick.release();
  EXPECT_EQ(requests(zk, "g", "y"), 0u) << describe(lock_children(zk, "g", "y"));
  Lease again = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(again);
  EXPECT_GT(again.token(), next_token);
  again.release();
  Lease held = other.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  std::this_thread::sleep_for(1700ms);  // past the TTL of `quick` and `again`
  EXPECT_FALSE(held.lost());
  EXPECT_EQ(requests(zk, "g", "y"), 1u) << "a released grant's delete hit a later holder";
  held.release();
  EXPECT_TRUE(no_requests(zk, "g", "x")) << describe(lock_children(zk, "g", "x"));
}

}  // namespace
}  // namespace warden::testing
