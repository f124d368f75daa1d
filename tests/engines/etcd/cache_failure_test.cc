// Lock caching on etcd:// when the lock watch that stands in for a revoke breaks. etcd
// cannot push a revoke: a cached lock's client watches the lock (core/watch_revokes.h),
// and a watch that breaks is opened again and the lock looked at, so a request made
// while it was broken is still seen. Against a real etcd whose only member restarts.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(EtcdCacheFailure, ACachedLocksWatchBrokenByARestartIsOpenedAgainAndStillRevokes) {
  EtcdCluster cluster(EtcdOptions{1, {}});
  ClientOptions caching = with_ttl(10s);
  caching.cache_idle = std::chrono::hours(1);  // only a revoke gives the lock back in time
  Client a = Client::open(cluster.uri(), caching);
  Client b = Client::open(cluster.uri(), with_ttl(10s));
  LockOptions cached;
  cached.cache = true;
  std::uint64_t token = 0;
  {
    Lease lease = a.lock("g", "x", cached).acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    token = lease.token();
  }
  ASSERT_EQ(lock_keys(cluster, "g", "x").size(), 1u) << "cached: still granted on etcd";

  cluster.kill9(0);  // the watch stream breaks
  cluster.start(0);  // the lease and the key survive: etcd keeps both on disk

  Lease theirs = b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(20s));
  ASSERT_TRUE(theirs) << "the cached lock was not given back after its watch broke";
  EXPECT_GT(theirs.token(), token);
  const std::string metrics = a.metrics_text();
  EXPECT_NE(metrics.find("warden_cache_revokes_total{group=\"g\"} 1"), std::string::npos)
      << "given back, but not by a revoke (a lost lease?):\n"
      << metrics;
  theirs.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

}  // namespace
}  // namespace warden::testing
