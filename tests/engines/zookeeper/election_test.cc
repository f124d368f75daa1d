// zk:// elections beyond the conformance clauses: the candidate's value as another
// ZooKeeper client reads it from the request node, a proclaim that changes that node's
// data in place, and a proclaim by a leader whose node was deleted behind its back.
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/election.h"
#include "warden/error.h"

namespace warden::testing {
namespace {

class ZkElection : public ::testing::Test {
 protected:
  std::string leader_node() {
    const auto nodes = lock_children(zk_, "g", "leader");
    if (nodes.size() != 1) return "";
    return zk_lock_path("g", "leader", kPrefix) + '/' + nodes.front();
  }
  ZooKeeperEnsemble zk_;
};

TEST_F(ZkElection, TheValueIsInTheRequestNodesDataAndProclaimReplacesItInPlace) {
  Client client = Client::open(zk_.uri());
  Election election = client.election("g", "leader");
  Leadership leading = election.campaign("node-a:8080", Wait::none());
  ASSERT_TRUE(leading);
  const std::string node = leader_node();
  ASSERT_FALSE(node.empty()) << "one request node" << describe(group_tree(zk_));
  const auto before = zk_.data(node);
  ASSERT_TRUE(before);
  EXPECT_TRUE(before->starts_with("warden exclusive ")) << *before;
  EXPECT_TRUE(before->ends_with("\nnode-a:8080")) << *before;

  leading.proclaim("node-a:9090");
  EXPECT_EQ(leader_node(), node) << "a proclaim keeps the node (and so the term)";
  const auto after = zk_.data(node);
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->ends_with("\nnode-a:9090")) << *after;
  EXPECT_EQ(election.leader(), (Leader{"node-a:9090", leading.term()}));

  leading.resign();
  EXPECT_FALSE(zk_.exists(node));
}

TEST_F(ZkElection, AProclaimAfterTheNodeWasDeletedBehindTheLeadersBackIsLostAndCreatesNothing) {
  Client client = Client::open(zk_.uri());
  Leadership leading = client.election("g", "leader").campaign("a", Wait::none());
  ASSERT_TRUE(leading);
  const std::string node = leader_node();
  ASSERT_FALSE(node.empty());
  ASSERT_EQ(zk_.delete_node(node), ZOK);
  try {
    leading.proclaim("b");
    ADD_FAILURE() << "proclaimed on a deleted node";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::lost) << e.what();
  }
  EXPECT_FALSE(zk_.exists(node)) << "the proclaim created the node again";
  EXPECT_EQ(requests(zk_, "g", "leader"), 0u);
}

}  // namespace
}  // namespace warden::testing
