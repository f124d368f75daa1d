// etcd:// Client::inspect and Client::list beyond the conformance clauses
// (tests/conformance/status_test.cc): a cluster that is down is unavailable, and reading
// changes no key or revision.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

class EtcdInspect : public ::testing::Test {
 protected:
  EtcdCluster cluster_;
};

TEST_F(EtcdInspect, ADownClusterIsUnavailable) {
  Client client = Client::open(cluster_.uri());
  cluster_.kill9(0);
  for (const bool listing : {false, true}) {
    try {
      if (listing) {
        client.list("g");
      } else {
        client.inspect("g", "n");
      }
      ADD_FAILURE() << "no error from a stopped cluster";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
    }
  }
}

TEST_F(EtcdInspect, ReadingChangesNothing) {
  Client client = Client::open(cluster_.uri());
  Client other = Client::open(cluster_.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto keys = cluster_.keys_by_revision("warden/");
  for (int i = 0; i < 3; ++i) {
    client.inspect("g", "n");
    other.list("g");
  }
  const auto after = cluster_.keys_by_revision("warden/");
  ASSERT_EQ(after.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(after[i].key, keys[i].key);
    EXPECT_EQ(after[i].create_revision, keys[i].create_revision);
  }
  EXPECT_FALSE(other.lock("g", "n").acquire(Mode::exclusive, Wait::none()));
  const auto token = held.token();
  held.release();
  Lease next = other.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
}

}  // namespace
}  // namespace warden::testing
