// zk:// Client::inspect and Client::list beyond the conformance clauses
// (tests/conformance/status_test.cc): a server that is down fails the call, and reading
// changes no node.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "support/status_checks.h"
#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

class ZkInspect : public ::testing::Test {
 protected:
  ZooKeeperEnsemble zk_;
};

TEST_F(ZkInspect, ADownServerFailsTheCalls) {
  Client client = Client::open(zk_.uri());
  zk_.kill9(0);
  // Suspended: the call fails on connection loss or on its own timeout.
  expect_status_fails(client, {Errc::unavailable, Errc::deadline_exceeded});
}

TEST_F(ZkInspect, ReadingChangesNoNode) {
  Client client = Client::open(zk_.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  expect_status_reads_only(client, [&] {
    std::string records;
    for (const auto& node : warden_tree(zk_)) records += node + '\n';
    return records;
  });
}

}  // namespace
}  // namespace warden::testing
