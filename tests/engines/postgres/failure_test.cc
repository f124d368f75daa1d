// postgres:// when the credentials, the database or the privileges are wrong, and when
// the server dies under a waiter or restarts: each ends with a clear Error, changes
// nothing, and tokens never go back.
#include <gtest/gtest.h>

#include <future>
#include <string>

#include "support/postgres_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

Error open_error(const std::string& uri) {
  try {
    (void)Client::open(uri, unhurried_options());
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "opened " << uri;
  return Error(Errc::internal, "opened");
}

TEST(PostgresFailure, WrongPasswordIsPermissionDenied) {
  PostgresServer server;
  const Error e = open_error(server.uri_as(PostgresServer::kSuperuser, "wrong", "postgres"));
  EXPECT_EQ(e.code(), Errc::permission_denied) << e.what();
  EXPECT_NE(std::string(e.what()).find("password authentication failed"), std::string::npos)
      << e.what();
  EXPECT_EQ(std::string(e.what()).find("wrong"), std::string::npos) << "leaks the password";
  EXPECT_EQ(server.value("SELECT to_regclass('warden.locks')"), "") << "changed something";
}

TEST(PostgresFailure, UnknownDatabaseIsInvalidArgumentNamingIt) {
  PostgresServer server;
  const Error e = open_error(
      server.uri_as(PostgresServer::kSuperuser, PostgresServer::kPassword, "no_such_db"));
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_NE(std::string(e.what()).find("no_such_db"), std::string::npos) << e.what();
}

TEST(PostgresFailure, UserWithoutCreateRightsGetsAnErrorNamingThePrivilege) {
  PostgresServer server;
  server.query("CREATE ROLE plain LOGIN PASSWORD 'plain-pw'");
  const Error e = open_error(server.uri_as("plain", "plain-pw", "postgres"));
  EXPECT_EQ(e.code(), Errc::permission_denied) << e.what();
  EXPECT_NE(std::string(e.what()).find("CREATE privilege"), std::string::npos) << e.what();
  EXPECT_EQ(server.value("SELECT to_regnamespace('warden')"), "") << "left a half registry";

  // Once an administrator installed the registry and granted its use, the same user works.
  (void)Client::open(server.uri(), unhurried_options());
  server.query(
      "GRANT USAGE ON SCHEMA warden TO plain;"
      "GRANT SELECT, INSERT, UPDATE ON warden.locks TO plain;"
      "GRANT USAGE ON ALL SEQUENCES IN SCHEMA warden TO plain");
  Client plain = Client::open(server.uri_as("plain", "plain-pw", "postgres"), unhurried_options());
  Lease lease = plain.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_TRUE(plain.check(lease.sequencer()));
}

// A statement whose answer never comes (the server frozen whole, a session already open)
// ends at op_timeout with an error that names what was asked: a stall is told apart
// from a slow login, and says where it stalled.
TEST(PostgresFailure, AnUnansweredStatementIsNamedInItsTimeout) {
  PostgresServer server;
  Client client = Client::open(server.uri(), quick_options(2000ms));
  {
    Lease warm = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(warm);
    warm.release();  // its session goes back to the pool, open
  }
  server.process().signal_family(SIGSTOP);
  try {
    (void)client.lock("g", "y").acquire(Mode::exclusive, Wait::none());
    ADD_FAILURE() << "a frozen server granted a lock";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::deadline_exceeded) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("did not answer in time ("), std::string::npos) << what;
  }
  server.process().signal_family(SIGCONT);
}

TEST(PostgresFailure, ServerKilledUnderAWaiterEndsItsWaitWithUnavailable) {
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  Client waiter = Client::open(server.uri(), unhurried_options());
  LockOptions short_ttl;
  short_ttl.ttl = 1500ms;
  Lease held = holder.lock("g", "x", short_ttl).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.lock("g", "x").acquire(Mode::exclusive, Wait::forever());
  });
  ASSERT_TRUE(eventually([&] {
    return server.value("SELECT count(*) FROM pg_locks WHERE NOT granted AND " +
                        pg_advisory_rows(pg_lock_id_sql("g", "x"))) == "1";
  }));
  server.kill9();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "a hang";
  try {
    (void)waiting.get();
    ADD_FAILURE() << "granted by a dead server";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
  }
  EXPECT_TRUE(eventually([&] { return held.lost(); }, 10s)) << "the holder's session is gone";
  server.start();
  // Nothing left: no session holds or waits for anything of warden's.
  EXPECT_EQ(server.value("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), "0");
  Client after = Client::open(server.uri(), unhurried_options());
  EXPECT_TRUE(after.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
}

TEST(PostgresFailure, TokensNeverGoBackAcrossACrashAndRestart) {
  PostgresServer server;
  std::uint64_t last = 0;
  for (int round = 0; round < 3; ++round) {
    Client client = Client::open(server.uri(), unhurried_options());
    for (int i = 0; i < 5; ++i) {
      Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
      ASSERT_TRUE(lease);
      EXPECT_GT(lease.token(), last) << "round " << round;
      last = lease.token();
      if (i == 4 && round < 2) {
        server.kill9();  // with the lease still held
        server.start();
      }
    }
  }
}

}  // namespace
}  // namespace warden::testing
