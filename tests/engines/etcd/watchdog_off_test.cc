// etcd:// with ClientOptions::watchdog = false: each grant has a lease of its own that
// nobody keeps alive once it is granted. The client gives the lock up at the TTL it
// asked for; etcd, whose lease TTLs are whole seconds, lets the key go at the TTL
// rounded up, and only then hands the lock on.
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

TEST(EtcdWatchdogOff, GrantIsLostAtItsTtlAndEtcdLetsTheKeyGoAtTheWholeSecond) {
  EtcdCluster cluster;
  ClientOptions options = with_ttl(1500ms);
  options.watchdog = false;
  Client client = Client::open(cluster.uri(), options);
  Client other = Client::open(cluster.uri());  // watchdog on

  const auto asked = Clock::now();
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const auto granted = Clock::now();
  const std::uint64_t token = lease.token();
  std::atomic<Clock::rep> lost_at{0};
  lease.on_lost([&] { lost_at = Clock::now().time_since_epoch().count(); });
  const std::string own_lease = lease_of_lock(cluster, "x");
  EXPECT_FALSE(own_lease.empty()) << "the grant's key has no lease";

  auto waiting = acquire_queued(other, cluster, "x", Mode::exclusive, Wait::up_to(10s));
  {
    // Both keys, unless the grant's 2 s etcd lease already ran out (a loaded machine can
    // take that long over the acquire and the looks above, and did): then the waiter's
    // key is the one left, and there is nothing to compare.
    const auto keys = lock_keys(cluster, "g", "x");
    if (keys.size() == 2) {
      EXPECT_NE(lease_of(cluster, keys[0]), lease_of(cluster, keys[1]))
          << "the grant and the waiter share a lease";
    }
  }

  // lost() turns true just before the callbacks run: wait for the callback's stamp.
  ASSERT_TRUE(eventually([&] { return lease.lost() && lost_at.load() != 0; }, 1500ms + kPrompt))
      << "the grant outlived its TTL on the client";
  const Clock::time_point lost{Clock::duration(lost_at.load())};
  ASSERT_NE(lost_at.load(), 0) << "on_lost did not run";
  // The TTL counts from before the acquire was sent; 100 ms for the reaper's wake-up.
  EXPECT_LE(lost - asked, 1500ms + 100ms) << "lost after its TTL";
  EXPECT_GE(lost - granted, 1000ms) << "lost long before its TTL";

  // etcd's lease is 2 s: the key goes by itself within that (and etcd's half-second
  // expiry sweep), and then the waiter gets the lock.
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "x") == 1; },
                         2s + 1500ms - (Clock::now() - granted)))
      << "the unrenewed grant's key outlived its lease:" << describe(lock_keys(cluster, "g", "x"));
  ASSERT_EQ(waiting.wait_for(kQueued), std::future_status::ready) << "the waiter was not granted";
  const auto handed_on = Clock::now();
  Lease next = waiting.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  // The TTL and etcd's lease both count from the acquire's sending (`asked`), not from
  // its return: under load the acquire itself can take half a second.
  EXPECT_GE(handed_on - asked, 1500ms) << "etcd handed the lock on before the client let go";
  EXPECT_FALSE(client.check(lease.sequencer()));
  EXPECT_NO_THROW(lease.release());
  next.release();

  // A grant released before its TTL goes at once, lease and all.
  Lease quick = client.lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(quick);
  const std::string quick_lease = lease_of_lock(cluster, "y");
  quick.release();
  EXPECT_TRUE(warden_keys(cluster).empty()) << "left:" << describe(warden_keys(cluster));
  if (!quick_lease.empty()) {
    const std::string ttl = cluster.etcdctl({"lease", "timetolive", quick_lease});
    EXPECT_NE(ttl.find("already expired"), std::string::npos)
        << "the released grant's lease lives on: " << ttl;
  }
}

}  // namespace
}  // namespace warden::testing
