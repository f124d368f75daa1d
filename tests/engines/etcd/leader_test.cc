// etcd:// across the loss of the cluster's leader: the member every client talks to
// is killed with -9 while one client holds two locks and two more wait in line. The
// holder keeps its leases (they live in the replicated lease table, and the clients
// fail over to the surviving members), the queue keeps its order, and fencing tokens
// keep increasing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/fence_gate.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(EtcdLeader, LeaderKilledHolderKeepsItsLeasesAndTheQueueKeepsItsOrder) {
  EtcdCluster cluster(EtcdOptions{3, {}});
  const int old_leader = cluster.leader();
  // Every client talks to the leader first: it is the member that goes away.
  const std::string uri = uri_starting_at(cluster, old_leader);
  const ClientOptions options = with_ttl(2s);
  Client a = Client::open(uri, options);
  Client b = Client::open(uri, options);
  Client c = Client::open(uri, options);
  FenceGate gate;

  Lease held = a.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lease other = a.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(other);
  ASSERT_TRUE(gate.admit(held.sequencer()));

  auto b_waits = acquire_queued(b, cluster, "x", Mode::exclusive, Wait::up_to(60s), {}, 2);
  ASSERT_EQ(requests(cluster, "g", "x"), 2u) << "B did not queue";
  auto c_waits = acquire_queued(c, cluster, "x", Mode::exclusive, Wait::up_to(60s), {}, 3);
  ASSERT_EQ(requests(cluster, "g", "x"), 3u) << "C did not queue";
  // Time to settle into their watches; both still wait.
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(outcome(b_waits), "still waiting") << "B's wait ended while A held x";
  ASSERT_EQ(outcome(c_waits), "still waiting") << "C's wait ended while A held x";

  cluster.kill9(old_leader);
  const int new_leader = cluster.leader();
  EXPECT_NE(new_leader, old_leader);

  // Two TTLs: long enough for a lease that nobody renews to run out twice over.
  const auto watch_until = Clock::now() + 2 * options.lock_defaults.ttl;
  while (Clock::now() < watch_until) {
    ASSERT_FALSE(held.lost()) << "the holder lost x after the leader died";
    ASSERT_FALSE(other.lost()) << "the holder lost y after the leader died";
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(a.check(held.sequencer())) << "the new leader does not know A's grant";
  EXPECT_TRUE(b.check(held.sequencer())) << "the new leader does not know A's grant";
  EXPECT_TRUE(a.check(other.sequencer()));
  ASSERT_EQ(outcome(b_waits), "still waiting") << "B's wait ended while A held x";
  ASSERT_EQ(outcome(c_waits), "still waiting") << "C's wait ended while A held x";
  EXPECT_EQ(requests(cluster, "g", "x"), 3u) << "a request key went with the leader";

  const std::uint64_t a_token = held.token();
  held.release();
  ASSERT_EQ(b_waits.wait_for(10s), std::future_status::ready) << "B was not granted after A";
  Lease b_lease = b_waits.get();
  ASSERT_TRUE(b_lease);
  EXPECT_GT(b_lease.token(), a_token);
  EXPECT_TRUE(gate.admit(b_lease.sequencer())) << "B's token was rejected";
  // C queued behind B, so it still waits.
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(c_waits.wait_for(0s), std::future_status::timeout) << "C was granted before B released";

  const std::uint64_t b_token = b_lease.token();
  b_lease.release();
  ASSERT_EQ(c_waits.wait_for(10s), std::future_status::ready) << "C was not granted after B";
  Lease c_lease = c_waits.get();
  ASSERT_TRUE(c_lease);
  EXPECT_GT(c_lease.token(), b_token);
  EXPECT_TRUE(gate.admit(c_lease.sequencer())) << "C's token was rejected";
  const std::uint64_t c_token = c_lease.token();
  c_lease.release();
  EXPECT_FALSE(other.lost());
  other.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));

  // The old leader comes back as a follower with the whole history: its own clients
  // get the lock with a token above every earlier one.
  cluster.start(old_leader);
  Client d = Client::open(cluster.uri_of(old_leader), options);
  Lease d_lease = d.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s));
  ASSERT_TRUE(d_lease) << "no grant through the restarted member";
  EXPECT_GT(d_lease.token(), c_token);
  EXPECT_TRUE(gate.admit(d_lease.sequencer()));
  d_lease.release();
}

// While the survivors elect a new leader, a member answers at once with "leader
// changed" or "no leader". Clients that call in that window wait for the election to
// end (within op_timeout) instead of failing.
TEST(EtcdLeader, CallsMadeDuringTheElectionWaitForTheNewLeader) {
  EtcdCluster cluster(EtcdOptions{3, {}});
  const int old_leader = cluster.leader();
  Client client = Client::open(uri_starting_at(cluster, old_leader), with_ttl(2s));
  Lease held = client.lock("g", "held").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  std::atomic<bool> done{false};
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<int> cycles{0};
  std::vector<std::jthread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      const std::string name = "k" + std::to_string(t);
      while (!done.load()) {
        try {
          Lease lease = client.lock("g", name).acquire(Mode::exclusive, Wait::up_to(10s));
          if (!lease) throw std::runtime_error("no grant of a free lock");
          if (!client.check(held.sequencer())) throw std::runtime_error("held lock not seen");
          lease.release();
          cycles.fetch_add(1);
        } catch (const std::exception& e) {
          std::lock_guard lock(mu);
          failures.push_back(e.what());
        }
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return cycles.load() >= 20; }, 10s)) << "no cycles before the kill";
  cluster.kill9(old_leader);
  EXPECT_NE(cluster.leader(), old_leader);
  const int after_kill = cycles.load();
  ASSERT_TRUE(eventually([&] { return cycles.load() >= after_kill + 40; }, 10s))
      << "no cycles after the election";
  done = true;
  callers.clear();
  std::string all;
  for (const auto& f : failures) all += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << failures.size() << " calls failed:" << all;
  EXPECT_FALSE(held.lost());
}

}  // namespace
}  // namespace warden::testing
