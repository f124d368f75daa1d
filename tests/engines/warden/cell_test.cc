// warden:// against a wardend cell (warden://h1:p1,h2:p2,h3:p3): the client finds the
// leader from whichever member it asks first, and a lock held, a wait under way and the
// watchdog's renewals carry on at the next leader when the first is killed.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

#include "support/server_process.h"
#include "support/test_certs.h"
#include "support/tls_wardend.h"
#include "support/wardend_cell.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

// The members' addresses, the one at `first` listed first.
std::string cell_uri(WardendCell& cell, std::size_t first, const std::string& auth = "") {
  std::string uri = "warden://" + auth + "127.0.0.1:" + std::to_string(cell.port(first));
  for (std::size_t i = 0; i < cell.size(); ++i) {
    if (i != first) uri += ",127.0.0.1:" + std::to_string(cell.port(i));
  }
  return uri;
}

TEST(WardenCellClient, AHeldLockAndAWaitCarryOnAtTheNextLeader) {
  WardendCell cell;
  const std::size_t leader = cell.wait_for_leader();
  const std::size_t follower = (leader + 1) % cell.size();
  ClientOptions options;
  options.op_timeout = 5s;
  Client a = Client::open(cell_uri(cell, follower), options);
  Client b = Client::open(cell_uri(cell, follower), options);

  Lease held = a.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint64_t token = held.token();
  auto waited = std::async(std::launch::async, [&] {
    return b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(90s));
  });

  cell.process(leader).kill9();
  const std::size_t next = cell.wait_for_leader();
  ASSERT_NE(next, leader);
  EXPECT_FALSE(held.lost()) << "the lease was lost across the failover";
  Client c = Client::open(cell_uri(cell, next), options);
  EXPECT_FALSE(c.lock("g", "x").acquire(Mode::exclusive, Wait::none()))
      << "the new leader granted a lock held";
  held.release();

  Lease after = waited.get();
  ASSERT_TRUE(after) << "the wait did not carry on at the new leader";
  EXPECT_GT(after.token(), token);
}

// A wardens:// cell: members with `--listen none` and a TLS listener, which takes the
// member's address; -MOVED names it, and the client follows over TLS.
TEST(WardenCellClient, AWardensCellIsFoundAndFailsOverOverTls) {
  WardendCell cell(3, wardend_tls_args(false, {"--listen", "none"}));
  const std::size_t leader = cell.wait_for_leader();
  const std::size_t follower = (leader + 1) % cell.size();
  std::string uri = cell_uri(cell, follower);
  uri.replace(0, std::string("warden://").size(), "wardens://");
  uri += "?ca=" + TestCerts::shared().ca().cert.string();
  Client client = Client::open(uri);
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint64_t token = held.token();
  held.release();
  cell.process(leader).kill9();
  ASSERT_NE(cell.wait_for_leader(), leader);
  Lease again = client.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(30s));
  ASSERT_TRUE(again);
  EXPECT_GT(again.token(), token);
}

// No member answers: Client::open fails at once, naming the cell and each member.
TEST(WardenCellClient, ACellWithNoMemberUpIsUnavailableNamingItsMembers) {
  const std::string a = "127.0.0.1:" + std::to_string(free_port());
  const std::string b = "127.0.0.1:" + std::to_string(free_port());
  try {
    (void)Client::open("warden://" + a + "," + b);
    ADD_FAILURE() << "opened a cell nobody serves";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("no member of the wardend cell"), std::string::npos) << what;
    EXPECT_NE(what.find(a), std::string::npos) << what;
    EXPECT_NE(what.find(b), std::string::npos) << what;
  }
}

TEST(WardenCellClient, APasswordIsCheckedByEveryMember) {
  WardendCell cell(3, {"--requirepass", "s3cret"});
  const std::size_t leader = cell.wait_for_leader();
  const std::size_t follower = (leader + 1) % cell.size();
  Client ok = Client::open(cell_uri(cell, follower, ":s3cret@"));
  EXPECT_TRUE(ok.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  try {
    (void)Client::open(cell_uri(cell, follower, ":wrong@"));
    ADD_FAILURE() << "a wrong password was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::permission_denied) << e.what();
  }
}

}  // namespace
}  // namespace warden::testing
