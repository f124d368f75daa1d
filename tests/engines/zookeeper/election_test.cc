// zk:// elections beyond the conformance clauses: the candidate's value as another
// ZooKeeper client reads it from the request node, a proclaim that changes that node's
// data in place, and a proclaim by a leader whose node was deleted behind its back.
#include "warden/election.h"

#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/observed_leaders.h"
#include "test_util.h"
#include "warden/client.h"
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

// An observer's first watch is set while the lock node may not exist yet: a listing
// that finds no node is followed by an exists watch, and a campaign that made the lock
// node between the two left the observer with a watch on a node that only gains
// children, so it never heard of the grant (its poll is an hour). The observer's first
// report ("no leader") comes just before it sets that watch; each round campaigns a
// little later after it, sweeping across the window, in a group of its own (so the
// campaign makes the group's node and the lock node, as a first campaign does).
TEST_F(ZkElection, AnObserverStartedBeforeTheLockNodeExistsIsToldOfTheFirstGrant) {
  using namespace std::chrono_literals;
  Client observing = Client::open(zk_.uri());
  Client campaigning = Client::open(zk_.uri());
  int missed = 0;
  std::string first_missed;
  for (int round = 0; round < 200; ++round) {
    const std::string group = "g" + std::to_string(round);
    ObservedLeaders observed;
    std::promise<void> started;
    std::jthread observer([&](std::stop_token stop) {
      observing.election(group, "leader")
          .observe(
              [&, first = true](const std::optional<Leader>& leader) mutable {
                observed.add(leader);
                if (std::exchange(first, false)) started.set_value();
              },
              stop, 1h);
    });
    started.get_future().wait();
    std::this_thread::sleep_for(std::chrono::microseconds(25 * (round % 20)));
    Leadership leading = campaigning.election(group, "leader").campaign("a", Wait::none());
    ASSERT_TRUE(leading);
    if (!observed.saw(Leader{"a", leading.term()}, 3s) && missed++ == 0) {
      first_missed = group + " (told: " + observed.describe() + ")";
    }
    leading.resign();
    observer.request_stop();
  }
  EXPECT_EQ(missed, 0) << "observers never told of a grant, the first: " << first_missed;
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
