// zk:// under contention: the shared fenced-counter run (support/contention.h) of 32
// threads on one lock. Afterwards no request node is left, and the server's container
// check removes the lock and group nodes too.
#include <gtest/gtest.h>

#include "support/contention.h"
#include "test_util.h"

namespace warden::testing {
namespace {

TEST(ZkContention, ThirtyTwoThreadsKeepMutualExclusionAndFencing) {
  ZooKeeperEnsemble zk;
  const ContentionResult result = run_fenced_contention(zk.uri(), "g", "x");
  EXPECT_EQ(result.problems(), "");
  EXPECT_TRUE(no_requests(zk, "g", "x")) << "left:" << describe(lock_children(zk, "g", "x"));
  // The lock's container, then the group's, go at the server's next checks.
  EXPECT_TRUE(eventually([&] { return group_tree(zk).empty() && !zk.exists("/warden/g"); }, 5s))
      << "left:" << describe(warden_tree(zk));
}

}  // namespace
}  // namespace warden::testing
