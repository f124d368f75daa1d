// etcd:// when keep-alives cannot get through: a member frozen with SIGSTOP. Alone, it
// cannot keep the session alive, so the holder must report its loss while the member
// is still frozen, before etcd can hand the lock on; in a cluster of three, the client
// moves to another member and keeps its lease.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <future>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/fence_gate.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(EtcdPause, KeepAlivesBlockedPastTheTtlLoseTheLeaseBeforeEtcdHandsItOn) {
  EtcdCluster cluster;
  const ClientOptions holder_options = with_ttl(2s);
  // The waiter's reads sit out the pause instead of failing: it should simply be
  // granted afterwards.
  const ClientOptions waiter_options = with_ttl(2s, 20s);
  Client holder = Client::open(cluster.uri(), holder_options);
  Client waiter = Client::open(cluster.uri(), waiter_options);

  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint64_t first_token = held.token();
  std::atomic<Clock::rep> lost_at{0};
  held.on_lost([&] { lost_at = Clock::now().time_since_epoch().count(); });
  auto waiting = acquire_queued(waiter, cluster, "x", Mode::exclusive, Wait::up_to(30s));
  ASSERT_EQ(requests(cluster, "g", "x"), 2u) << "the waiter did not queue";
  std::this_thread::sleep_for(1s);  // a few keep-alive rounds got through
  ASSERT_FALSE(held.lost());

  const auto ttl = holder_options.lock_defaults.ttl;
  cluster.pause(0);
  const auto paused = Clock::now();
  const bool lost_in_time =
      eventually([&] { return held.lost_token().stop_requested(); }, ttl + 1500ms);
  std::this_thread::sleep_until(paused + ttl + 1500ms);
  const auto resumed = Clock::now();
  cluster.resume(0);
  ASSERT_TRUE(lost_in_time) << "the keep-alives failed for " << seconds(resumed - paused)
                            << " s but the lease was never reported lost";
  const Clock::time_point lost{Clock::duration(lost_at.load())};
  ASSERT_NE(lost_at.load(), 0) << "on_lost did not run";
  EXPECT_LT(lost, resumed) << "the loss was reported after the member could run again";
  EXPECT_LE(lost - paused, ttl) << "the loss was reported after etcd could let the lease go";
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout)
      << "the waiter ended while the member was frozen";

  // etcd lets the lease go now; the waiter gets the lock.
  ASSERT_EQ(waiting.wait_for(15s), std::future_status::ready) << "the waiter was never granted";
  const auto granted = Clock::now();
  Lease next;
  try {
    next = waiting.get();
  } catch (const Error& e) {
    FAIL() << "the waiter's acquire failed after the member came back: " << to_string(e.code())
           << ": " << e.what();
  }
  ASSERT_TRUE(next) << "the waiter gave up";
  EXPECT_GT(next.token(), first_token);
  EXPECT_GT(granted, lost);
  EXPECT_FALSE(holder.check(held.sequencer())) << "etcd still holds the lost grant";
  EXPECT_TRUE(waiter.check(next.sequencer()));
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(next.lost()) << "the waiter was granted on a session that was gone";
  EXPECT_NO_THROW(held.release());
  next.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

// A waiter whose reads of the queue get no answer for longer than its op_timeout (its
// only member frozen, as a long GC pause would) waits on while its deadline has time: its
// place in the queue is its key, which lives as long as its lease, far longer here. Once
// the member runs again the waiter is granted in its turn, and nothing failed.
TEST(EtcdPause, AWaiterSitsOutAFreezeLongerThanItsOpTimeout) {
  EtcdCluster cluster;
  const ClientOptions options = with_ttl(30s, 1s);
  Client holder = Client::open(cluster.uri(), options);
  Client waiter = Client::open(cluster.uri(), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = acquire_queued(waiter, cluster, "x", Mode::exclusive, Wait::up_to(60s));
  ASSERT_EQ(requests(cluster, "g", "x"), 2u) << "the waiter did not queue";

  cluster.pause(0);
  std::this_thread::sleep_for(3 * options.op_timeout);
  cluster.resume(0);
  ASSERT_EQ(waiting.wait_for(0s), std::future_status::timeout)
      << "the waiter's acquire ended while the member was frozen";

  EXPECT_TRUE(eventually([&] {
    try {
      held.release();
      return true;
    } catch (const Error&) {
      return false;  // the member is still catching up
    }
  }));
  ASSERT_EQ(waiting.wait_for(15s), std::future_status::ready) << "the waiter was never granted";
  Lease next;
  try {
    next = waiting.get();
  } catch (const Error& e) {
    FAIL() << "the waiter's acquire failed: " << to_string(e.code()) << ": " << e.what();
  }
  ASSERT_TRUE(next) << "the waiter gave up";
  next.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdPause, FirstMemberFrozenTheClientFailsOverAndKeepsItsLease) {
  EtcdCluster cluster(EtcdOptions{3, {}});
  // The default op_timeout (5 s, longer than the TTL): every call the watchdog and the
  // keeper make to keep the lease must still move on from the frozen member in time.
  // 4 s: a failover must fit in what is left of the lease after its last renewal, and
  // with a 2 s TTL a sanitizer build on two busy cores once took longer (1.5 s).
  const ClientOptions options = with_ttl(4s);
  Client client = Client::open(cluster.uri(), options);  // member 0 first
  FenceGate gate;
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  ASSERT_TRUE(gate.admit(held.sequencer()));
  std::atomic<Clock::rep> lost_at{0};
  held.on_lost([&] { lost_at = Clock::now().time_since_epoch().count(); });
  std::this_thread::sleep_for(500ms);

  cluster.pause(0);
  const auto paused = Clock::now();
  const auto watch_until = paused + 3 * options.lock_defaults.ttl;
  while (Clock::now() < watch_until && !held.lost()) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(held.lost()) << "the lease was lost "
                            << seconds(Clock::time_point{Clock::duration(lost_at.load())} - paused)
                            << " s after member 0 froze, although two members could renew it";
  EXPECT_TRUE(client.check(held.sequencer()));

  // The other members still say it is held: nobody else gets it.
  Client other = Client::open(uri_in_order(cluster, {1, 2}), options);
  EXPECT_FALSE(other.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  cluster.resume(0);

  held.release();
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(next);
  EXPECT_TRUE(gate.admit(next.sequencer()));
  next.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdPause, LeaseLostOnTheClientAfterAShortFreezeIsFreedOnEtcdToo) {
  EtcdCluster cluster;
  // etcd's lease is 2 s (the TTL rounded up); the client gives up at 1.5 s. A freeze
  // between the two loses the lease on the client while the session lives on in etcd.
  const ClientOptions options = with_ttl(1500ms, 1000ms);
  Client holder = Client::open(cluster.uri(), options);
  Client other = Client::open(cluster.uri(), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::string session = lease_of_lock(cluster, "x");
  std::this_thread::sleep_for(700ms);  // keep-alives got through
  ASSERT_FALSE(held.lost());

  cluster.pause(0);
  const bool lost = eventually([&] { return held.lost(); }, 1500ms + kPrompt);
  cluster.resume(0);
  ASSERT_TRUE(lost) << "the lease was not reported lost";
  EXPECT_NO_THROW(held.release());
  std::this_thread::sleep_for(300ms);  // the keeper's next round
  const bool session_lives =
      cluster.etcdctl({"lease", "timetolive", session}).find("expired") == std::string::npos;
  std::printf("the session %s the freeze\n", session_lives ? "outlived" : "did not outlive");

  // Whether or not the session outlived the freeze, the lock the client gave up must
  // become free within etcd's lease length.
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(2s + kPrompt));
  EXPECT_TRUE(next) << "the lease the holder lost is still held in etcd (session "
                    << (session_lives ? "alive" : "gone")
                    << "):" << describe(lock_keys(cluster, "g", "x"));
  next = Lease();
  // The holder's Client can take it again, too: it does not wait behind its own key.
  Lease again = holder.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(2s + kPrompt));
  EXPECT_TRUE(again) << "the holder's Client waits behind its own lost grant:"
                     << describe(lock_keys(cluster, "g", "x"));
  again = Lease();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

}  // namespace
}  // namespace warden::testing
