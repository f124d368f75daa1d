// etcd:// Client::inspect and Client::list beyond the conformance clauses
// (tests/conformance/status_test.cc): a cluster that is down is unavailable, and reading
// changes no key or revision.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "support/status_checks.h"
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
  expect_status_fails(client);
}

TEST_F(EtcdInspect, ReadingChangesNoKeyOrRevision) {
  Client client = Client::open(cluster_.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  expect_status_reads_only(client, [&] {
    std::string records;
    for (const auto& k : cluster_.keys_by_revision("warden/")) {
      records += k.key + ' ' + std::to_string(k.create_revision) + '\n';
    }
    return records;
  });
}

}  // namespace
}  // namespace warden::testing
