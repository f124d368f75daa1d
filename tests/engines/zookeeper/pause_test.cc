// zk:// when the connection is lost but the session is not: a standalone server frozen
// with SIGSTOP for less than the session timeout (but longer than the 2/3 of it after
// which the C client gives the connection up and reconnects). A waiter's request node
// lives on with its session, so the waiter must still be granted when the holder
// releases; a lease the client gave up during the freeze (its TTL, shorter than the
// session timeout, ran out) must not leave its node behind for the session to keep.
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

namespace warden::testing {
namespace {

TEST(ZkPause, WaiterWhoseConnectionIsLostIsStillGrantedAfterTheHolderReleases) {
  ZooKeeperEnsemble zk;
  // 4 s sessions: the connection is given up after about 2.7 s of silence; a 3 s freeze
  // loses it, and the sessions survive. The holder renews every 300 ms.
  const std::string uri = uri_with(zk, "session_timeout_ms=4000&on_suspend=wait");
  const ClientOptions options = with_ttl(4s, 5s, 300ms);
  Client holder = Client::open(uri, options);
  Client waiter = Client::open(uri, options);
  FenceGate gate;

  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  ASSERT_TRUE(gate.admit(held.sequencer()));
  auto waiting = acquire_queued(waiter, zk, "x", Mode::exclusive, Wait::up_to(30s));
  ASSERT_EQ(requests(zk, "g", "x"), 2u) << "the waiter did not queue";
  std::this_thread::sleep_for(700ms);  // the waiter polls at its slowest by now

  zk.pause(0);
  std::this_thread::sleep_for(3s);
  zk.resume(0);
  ASSERT_EQ(waiting.wait_for(0s), std::future_status::timeout)
      << "the wait ended while the connection was lost: " << outcome(waiting);
  std::this_thread::sleep_for(700ms);  // reconnected
  ASSERT_EQ(waiting.wait_for(0s), std::future_status::timeout)
      << "the wait ended after the reconnect: " << outcome(waiting);
  EXPECT_FALSE(held.lost()) << "the holder lost its lease in a freeze shorter than its session";
  EXPECT_EQ(requests(zk, "g", "x"), 2u) << describe(lock_children(zk, "g", "x"));

  const std::uint64_t token = held.token();
  held.release();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready)
      << "the waiter was not granted after the holder released";
  Lease next;
  try {
    next = waiting.get();
  } catch (const Error& e) {
    FAIL() << "the waiter's acquire threw " << to_string(e.code()) << ": " << e.what();
  }
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  EXPECT_TRUE(gate.admit(next.sequencer()));
  EXPECT_TRUE(holder.check(next.sequencer()));
  next.release();
  EXPECT_TRUE(no_requests(zk, "g", "x")) << describe(lock_children(zk, "g", "x"));
}

TEST(ZkPause, LeaseLostOnTheClientWhileItsSessionLivesIsFreedOnZooKeeperToo) {
  ZooKeeperEnsemble zk;
  // A 1.5 s TTL under a 4 s session: a 2 s freeze loses the lease on the client (no
  // renewal got through within its TTL) while the session lives on. Both settings of
  // on_suspend: the connection is not even given up (2 s < 2/3 of 4 s).
  const ClientOptions options = with_ttl(1500ms, 1000ms);
  Client lose = Client::open(uri_with(zk, "session_timeout_ms=4000"), options);
  Client wait = Client::open(uri_with(zk, "session_timeout_ms=4000&on_suspend=wait"), options);
  Client other = Client::open(zk.uri(), options);
  Lease x = lose.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(x);
  Lease y = wait.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(y);
  std::this_thread::sleep_for(700ms);  // renewals got through
  ASSERT_FALSE(x.lost());
  ASSERT_FALSE(y.lost());

  zk.pause(0);
  const bool lost = eventually([&] { return x.lost() && y.lost(); }, 1500ms + kPrompt);
  std::this_thread::sleep_for(300ms);
  zk.resume(0);
  ASSERT_TRUE(lost) << "x lost: " << x.lost() << ", y lost: " << y.lost();
  EXPECT_NO_THROW(x.release());
  EXPECT_NO_THROW(y.release());

  // The sessions outlived the freeze; the locks the clients gave up must be free all
  // the same, within a TTL or so — not only when the Clients close.
  Lease x2 = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(3s));
  EXPECT_TRUE(x2) << "on_suspend=lose: the lost lease's node is still there:"
                  << describe(lock_children(zk, "g", "x"));
  Lease y2 = other.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(3s));
  EXPECT_TRUE(y2) << "on_suspend=wait: the lost lease's node is still there:"
                  << describe(lock_children(zk, "g", "y"));
  x2 = Lease();
  y2 = Lease();
  // The holders' Clients can take them again too: they do not wait behind their own
  // lost grants.
  Lease x3 = lose.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(2s));
  EXPECT_TRUE(x3) << "waits behind its own lost grant:" << describe(lock_children(zk, "g", "x"));
  Lease y3 = wait.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(2s));
  EXPECT_TRUE(y3) << "waits behind its own lost grant:" << describe(lock_children(zk, "g", "y"));
  x3 = Lease();
  y3 = Lease();
  EXPECT_TRUE(no_requests(zk, "g", "x")) << describe(lock_children(zk, "g", "x"));
  EXPECT_TRUE(no_requests(zk, "g", "y")) << describe(lock_children(zk, "g", "y"));
}

}  // namespace
}  // namespace warden::testing
