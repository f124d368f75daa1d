// redlock:// Client::inspect and Client::list beyond the conformance clauses
// (tests/conformance/status_test.cc): a key on a minority of masters is not a holder, a
// quorum's is; too few masters is unavailable; reading changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/status_checks.h"
#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

TEST(RedlockInspect, AKeyOnAMinorityIsNotAHolder) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options());
  masters.plant("g", "n", {0}, "someone:7", 10s);
  EXPECT_TRUE(client.inspect("g", "n").holders.empty());
  EXPECT_TRUE(client.list("g").empty());
  // Planted on a quorum, with its token: that is a holder.
  masters.plant("g", "n", {0, 1}, "someone:7", 10s);
  const LockStatus s = client.inspect("g", "n");
  ASSERT_EQ(s.holders.size(), 1u);
  EXPECT_EQ(s.holders[0].token, 7u);
}

TEST(RedlockInspect, ReadingChangesNoKeyAndTooFewMastersIsUnavailable) {
  RedisMasters masters(3);
  Client client = Client::open(masters.uri(), redlock_options());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  expect_status_reads_only(client, [&] {
    std::string records;
    for (const auto& key : masters.lock_keys("g", "n")) records += key + '\n';
    for (int i = 0; i < masters.size(); ++i) {
      records += masters.command(i, {"GET", grant_key("g", "n")}) + '\n';
    }
    return records;
  });

  masters.server(1).kill9();
  masters.server(2).kill9();
  expect_status_fails(client);
}

}  // namespace
}  // namespace warden::testing
