// etcd:// under contention: the shared fenced-counter run (support/contention.h) of 32
// threads on one lock, then no request key left behind.
#include <gtest/gtest.h>

#include "support/contention.h"
#include "test_util.h"

namespace warden::testing {
namespace {

TEST(EtcdContention, ThirtyTwoThreadsKeepMutualExclusionAndFencing) {
  EtcdCluster cluster;
  const ContentionResult result = run_fenced_contention(cluster.uri(), "g", "x");
  EXPECT_EQ(result.problems(), "");
  EXPECT_TRUE(eventually([&] { return lock_keys(cluster, "g", "x").empty(); }, kPrompt))
      << "left:" << describe(lock_keys(cluster, "g", "x"));
}

}  // namespace
}  // namespace warden::testing
