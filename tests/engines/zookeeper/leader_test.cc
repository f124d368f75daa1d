// zk:// across the loss of the ensemble's leader: the leader is killed with -9 while one
// client holds a lock and two more wait in line. Every client of the ensemble is
// disconnected while the followers elect a new leader; sessions survive (the new leader
// gives each its full timeout again). With on_suspend=wait the holder keeps its lease
// through the election, the queue keeps its order and the tokens keep increasing; with
// the default on_suspend=lose the holder is told at once that its lease is lost, and its
// node is deleted once it is connected again, so nobody stays blocked behind it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <string>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/fence_gate.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/sequencer.h"

namespace warden::testing {
namespace {

TEST(ZkLeader, LeaderKilledWithOnSuspendWaitTheHolderKeepsItsLeaseAndTheQueueItsOrder) {
  ZooKeeperEnsemble zk(ZooKeeperOptions{3});
  // 4 s sessions (the most a 200 ms tick allows), a TTL no shorter, and renewals every
  // 500 ms: the lease outlives an election of a couple of seconds.
  const std::string uri = uri_with(zk, "session_timeout_ms=4000&on_suspend=wait");
  const ClientOptions options = with_ttl(4s, 5s, 500ms);
  Client a = Client::open(uri, options);
  Client b = Client::open(uri, options);
  Client c = Client::open(uri, options);
  FenceGate gate;

  Lease held = a.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  ASSERT_TRUE(gate.admit(held.sequencer()));
  std::atomic<Clock::rep> lost_at{0};
  held.on_lost([&] { lost_at = stamp_now(); });

  auto b_waits = acquire_queued(b, zk, "x", Mode::exclusive, Wait::up_to(60s), {}, 2);
  ASSERT_EQ(requests(zk, "g", "x"), 2u) << "B did not queue";
  auto c_waits = acquire_queued(c, zk, "x", Mode::exclusive, Wait::up_to(60s), {}, 3);
  ASSERT_EQ(requests(zk, "g", "x"), 3u) << "C did not queue";
  std::this_thread::sleep_for(300ms);  // both settle into their watches
  ASSERT_EQ(b_waits.wait_for(0s), std::future_status::timeout) << "B: " << outcome(b_waits);
  ASSERT_EQ(c_waits.wait_for(0s), std::future_status::timeout) << "C: " << outcome(c_waits);

  const int old_leader = zk.leader();
  zk.kill9(old_leader);
  const auto killed = Clock::now();
  const int new_leader = zk.leader();
  EXPECT_NE(new_leader, old_leader);
  const auto elected = Clock::now();

  // Longer than a session timeout: a lease nobody could renew would be gone by then.
  const auto watch_until = killed + 4500ms;
  bool b_ended = false;
  bool c_ended = false;
  while (Clock::now() < watch_until) {
    ASSERT_FALSE(held.lost()) << "A lost its lease " << seconds(at(lost_at) - killed)
                              << " s after the leader was killed (new leader after "
                              << seconds(elected - killed) << " s)";
    if (!b_ended && b_waits.wait_for(0s) == std::future_status::ready) {
      b_ended = true;
      ADD_FAILURE() << "B's wait ended " << seconds(Clock::now() - killed)
                    << " s after the leader was killed: " << outcome(b_waits);
    }
    if (!c_ended && c_waits.wait_for(0s) == std::future_status::ready) {
      c_ended = true;
      ADD_FAILURE() << "C's wait ended " << seconds(Clock::now() - killed)
                    << " s after the leader was killed: " << outcome(c_waits);
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(a.check(held.sequencer())) << "the new leader does not know A's grant";
  EXPECT_TRUE(b.check(held.sequencer())) << "the new leader does not know A's grant";
  ASSERT_FALSE(b_ended || c_ended) << "the queue behind A is broken";
  EXPECT_EQ(requests(zk, "g", "x"), 3u)
      << "a request node went with the leader:" << describe(lock_children(zk, "g", "x"));

  const std::uint64_t a_token = held.token();
  const Sequencer held_sequencer = held.sequencer();
  held.release();
  ASSERT_EQ(b_waits.wait_for(10s), std::future_status::ready) << "B was not granted after A";
  Lease b_lease = b_waits.get();
  ASSERT_TRUE(b_lease);
  EXPECT_GT(b_lease.token(), a_token);
  EXPECT_TRUE(gate.admit(b_lease.sequencer())) << "B's token was rejected";
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(c_waits.wait_for(0s), std::future_status::timeout)
      << "C was granted before B released: " << outcome(c_waits);

  const std::uint64_t b_token = b_lease.token();
  b_lease.release();
  ASSERT_EQ(c_waits.wait_for(10s), std::future_status::ready) << "C was not granted after B";
  Lease c_lease = c_waits.get();
  ASSERT_TRUE(c_lease);
  EXPECT_GT(c_lease.token(), b_token);
  EXPECT_TRUE(gate.admit(c_lease.sequencer())) << "C's token was rejected";
  c_lease.release();
  EXPECT_FALSE(a.check(held_sequencer)) << "a released grant still checks";
  EXPECT_TRUE(no_requests(zk, "g", "x")) << "left:" << describe(lock_children(zk, "g", "x"));
}

TEST(ZkLeader, LeaderKilledWithOnSuspendLoseTheHolderIsToldAtOnceAndItsNodeGoes) {
  ZooKeeperEnsemble zk(ZooKeeperOptions{3});
  const std::string uri = uri_with(zk, "session_timeout_ms=4000");  // on_suspend=lose
  const ClientOptions options = with_ttl(4s, 5s, 500ms);
  Client a = Client::open(uri, options);
  Client other = Client::open(uri, options);
  FenceGate gate;

  Lease held = a.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  ASSERT_TRUE(gate.admit(held.sequencer()));
  Lease shared = a.lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);
  std::atomic<Clock::rep> lost_at{0};
  held.on_lost([&] { lost_at = stamp_now(); });
  std::this_thread::sleep_for(600ms);  // a renewal went through
  ASSERT_FALSE(held.lost());

  zk.kill9(zk.leader());
  const auto killed = Clock::now();
  ASSERT_TRUE(eventually([&] { return held.lost() && shared.lost(); }, 4s))
      << "x lost: " << held.lost() << ", y lost: " << shared.lost()
      << " after the connection dropped in the election";
  ASSERT_TRUE(eventually([&] { return lost_at.load() != 0; }, kPrompt)) << "on_lost did not run";
  // At the disconnect, not when the lease ran out (the last renewal + 4 s).
  EXPECT_LT(at(lost_at) - killed, 2500ms) << "the loss was noticed only near the lease's end";
  (void)zk.leader();

  // Once A's client is connected again, it deletes the nodes of the grants it gave up.
  EXPECT_TRUE(no_requests(zk, "g", "x", 10s))
      << "the lost grant's node is still there:" << describe(lock_children(zk, "g", "x"));
  EXPECT_TRUE(no_requests(zk, "g", "y", 2s))
      << "the lost grant's node is still there:" << describe(lock_children(zk, "g", "y"));
  EXPECT_FALSE(a.check(held.sequencer()));

  const std::uint64_t token = held.token();
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s));
  ASSERT_TRUE(next) << "the lock of the lost lease stays taken:"
                    << describe(lock_children(zk, "g", "x"));
  EXPECT_GT(next.token(), token);
  EXPECT_TRUE(gate.admit(next.sequencer()));
  EXPECT_TRUE(other.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(5s)))
      << "y stays taken:" << describe(lock_children(zk, "g", "y"));

  // A's Client works on once its lost leases are released.
  EXPECT_NO_THROW(held.release());
  EXPECT_NO_THROW(shared.release());
  auto a_waits = std::async(std::launch::async, [&] {
    return a.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s));
  });
  std::this_thread::sleep_for(200ms);
  const std::uint64_t next_token = next.token();
  next.release();
  ASSERT_EQ(a_waits.wait_for(10s), std::future_status::ready);
  Lease again = a_waits.get();
  ASSERT_TRUE(again) << "A could not take x again";
  EXPECT_GT(again.token(), next_token);
  EXPECT_TRUE(gate.admit(again.sequencer()));
  std::this_thread::sleep_for(600ms);
  EXPECT_FALSE(again.lost());
  again.release();
  EXPECT_TRUE(no_requests(zk, "g", "x")) << "left:" << describe(lock_children(zk, "g", "x"));
}

}  // namespace
}  // namespace warden::testing
