// mysql:// status against a real MariaDB: GET_LOCK locks cannot be listed, so a holder's
// token is the one whose token lock ("NAME/TOKEN") its session holds, found from the
// warden_holders row a grant's first renewal writes, or searched among the tokens handed
// out since. A stale row is never believed.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/mariadb_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

LockOptions with_ttl(std::chrono::milliseconds ttl) {
  LockOptions options;
  options.ttl = ttl;
  return options;
}

std::uint64_t status_token(Client& client) {
  const LockStatus s = client.inspect("g", "x");
  if (s.holders.size() != 1) {
    ADD_FAILURE() << s.holders.size() << " holders";
    return 0;
  }
  return s.holders[0].token;
}

std::string holders_row(MariaDbServer& server, std::uint64_t id) {
  return server
      .scalar("SELECT CONCAT(holder, ':', token) FROM warden.warden_holders WHERE id = " +
              std::to_string(id))
      .value_or("none");
}

// A grant whose first renewal (TTL 1.5 s: within a second) wrote its holders row.
Lease published_grant(Client& client, MariaDbServer& server) {
  Lease lease = client.lock("g", "x", with_ttl(1500ms)).acquire(Mode::exclusive, Wait::none());
  if (!lease) {
    ADD_FAILURE() << "not granted";
    return lease;
  }
  const std::uint64_t id = *server.lock_id("g", "x");
  EXPECT_TRUE(eventually([&] { return holders_row(server, id) != "none"; }, 10s));
  return lease;
}

TEST(MysqlInspect, AFreshGrantsTokenIsFoundBeforeItsFirstRenewalWroteItsRow) {
  MariaDbServer server;
  Client client = Client::open(server.uri());
  // No renewal during the test.
  Lease lease = client.lock("g", "x", with_ttl(60s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_EQ(holders_row(server, *server.lock_id("g", "x")), "none");
  EXPECT_EQ(status_token(client), lease.token());
}

TEST(MysqlInspect, TheFirstRenewalWritesTheRowAndStatusReadsTheTokenFromIt) {
  MariaDbServer server;
  Client client = Client::open(server.uri());
  Lease lease = published_grant(client, server);
  ASSERT_TRUE(lease);
  EXPECT_EQ(holders_row(server, *server.lock_id("g", "x")),
            std::to_string(*server.holder_session("g", "x")) + ":" + std::to_string(lease.token()));
  // The row alone is believed: with the sequence's bound lowered below the token, a
  // search could not find it.
  server.query("ALTER SEQUENCE warden.warden_tokens RESTART WITH 1");
  EXPECT_EQ(status_token(client), lease.token());
}

TEST(MysqlInspect, ARowOfAnEarlierHolderIsNotBelieved) {
  MariaDbServer server;
  Client client = Client::open(server.uri());
  std::uint64_t first = 0;
  {
    Lease lease = published_grant(client, server);
    ASSERT_TRUE(lease);
    first = lease.token();
  }
  EXPECT_TRUE(client.inspect("g", "x").holders.empty()) << "released: the row names no holder";
  // Another session holds the lock now, with the row still naming the first grant.
  Lease second = client.lock("g", "x", with_ttl(60s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(second);
  ASSERT_GT(second.token(), first);
  EXPECT_NE(holders_row(server, *server.lock_id("g", "x")).find(":" + std::to_string(first)),
            std::string::npos);
  EXPECT_EQ(status_token(client), second.token());
}

TEST(MysqlInspect, AHolderKilledByTheServerLeavesNoHolderBehind) {
  MariaDbServer server;
  Client client = Client::open(server.uri());
  Lease lease = published_grant(client, server);
  ASSERT_TRUE(lease);
  const std::uint64_t id = *server.lock_id("g", "x");
  server.query("KILL " + std::to_string(*server.holder_session("g", "x")));
  ASSERT_TRUE(eventually([&] { return !server.holder_session("g", "x"); }, 10s));
  EXPECT_NE(holders_row(server, id), "none") << "the row outlives the session";
  EXPECT_TRUE(client.inspect("g", "x").holders.empty());
  EXPECT_FALSE(client.check(lease.sequencer()));
}

}  // namespace
}  // namespace warden::testing
