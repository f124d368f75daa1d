// zk:// Client::inspect and Client::list beyond the conformance clauses
// (tests/conformance/status_test.cc): a server that is down fails the call, and reading
// changes no node.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

class ZkInspect : public ::testing::Test {
 protected:
  ZooKeeperEnsemble zk_;
};

TEST_F(ZkInspect, ADownServerIsUnavailable) {
  Client client = Client::open(zk_.uri());
  zk_.kill9(0);
  for (const bool listing : {false, true}) {
    try {
      if (listing) {
        client.list("g");
      } else {
        client.inspect("g", "n");
      }
      ADD_FAILURE() << "no error from a stopped server";
    } catch (const Error& e) {
      // Suspended: the call fails on connection loss or on its own timeout.
      EXPECT_TRUE(e.code() == Errc::unavailable || e.code() == Errc::deadline_exceeded) << e.what();
    }
  }
}

TEST_F(ZkInspect, ReadingChangesNothing) {
  Client client = Client::open(zk_.uri());
  Client other = Client::open(zk_.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto tree = warden_tree(zk_);
  for (int i = 0; i < 3; ++i) {
    client.inspect("g", "n");
    other.list("g");
  }
  EXPECT_EQ(warden_tree(zk_), tree);
  EXPECT_FALSE(other.lock("g", "n").acquire(Mode::exclusive, Wait::none()));
  const auto token = held.token();
  held.release();
  Lease next = other.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
}

}  // namespace
}  // namespace warden::testing
