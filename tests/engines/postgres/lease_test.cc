// postgres://'s lease is the holder's session: a killed holder frees the lock at once,
// and a holder paused past its TTL has its session ended by the server (not only by
// the client's own clock), its lost signal fires, and warden.fence() turns its late
// write on a real table away.
#include "warden/lease.h"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

#include "cli/process.h"
#include "support/postgres_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

// The backend pid of the session holding (group, name), or "" if none.
std::string holder_pid(PostgresServer& server, const std::string& group, const std::string& name) {
  return server
      .value("SELECT pid FROM pg_locks WHERE granted AND " +
             pg_advisory_rows(pg_lock_id_sql(group, name)))
      .value_or("");
}

// How many rows of accounts the UPDATE fenced by `token` changed, written as a user's
// service would write it and sent by PostgreSQL's own `psql`, not by anything of
// warden's: the fence is plain SQL for any client.
std::string fenced_update(PostgresServer& server, std::uint64_t token, int balance) {
  const std::string sql = "WITH u AS (UPDATE accounts SET balance = " + std::to_string(balance) +
                          " WHERE id = 42 AND warden.fence('accounts', 'acct-42', " +
                          std::to_string(token) + ") RETURNING 1) SELECT count(*) FROM u";
  const auto outcome = cli::testing::run(
      {"/usr/bin/psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
       std::to_string(server.port()), "-U", PostgresServer::kSuperuser, "-d",
       PostgresServer::kDatabase, "-c", sql},
      cli::testing::environment({}, {std::string("PGPASSWORD=") + PostgresServer::kPassword}));
  std::string text = outcome.out;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return outcome.status == 0 ? text : "psql failed: " + outcome.err;
}

// A DBA's timeouts on the role (or the database) are for the application's statements,
// not for the lock's: a wait for ever behind a holder outlasts the role's lock_timeout
// and statement_timeout and is granted when the holder lets go, and a timed wait waits
// its own time.
TEST(PostgresLease, ARolesLockAndStatementTimeoutsDoNotEndAWait) {
  PostgresServer server;
  server.query("ALTER ROLE " + std::string(PostgresServer::kSuperuser) +
               " SET lock_timeout = '300ms'; ALTER ROLE " + PostgresServer::kSuperuser +
               " SET statement_timeout = '500ms'");
  Client holder = Client::open(server.uri(), unhurried_options());
  Client next = Client::open(server.uri(), unhurried_options());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lease other = holder.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(other);
  auto forever = std::async(std::launch::async, [&] {
    return next.lock("g", "x").acquire(Mode::exclusive, Wait::forever());
  });
  const auto started = Clock::now();
  auto timed = std::async(std::launch::async, [&] {
    return next.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(1500ms));
  });
  EXPECT_FALSE(timed.get()) << "a timed wait on a held lock was granted";
  EXPECT_GE(Clock::now() - started, 1000ms) << "the role's timeouts ended the timed wait early";
  std::this_thread::sleep_for(1s);  // twice the role's longest timeout, in the wait
  held.release();
  Lease granted;
  ASSERT_NO_THROW(granted = forever.get()) << "the role's timeout ended the wait with an error";
  EXPECT_TRUE(granted);
}

TEST(PostgresLease, KilledHolderFreesTheLockAtOnceAndIsToldItLostIt) {
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  Client next = Client::open(server.uri(), unhurried_options());
  LockOptions options;
  options.ttl = 15s;  // the lock must come free long before the TTL could run out
  Lease held;
  try {
    held = holder.lock("g", "x", options).acquire(Mode::exclusive, Wait::none());
  } catch (const Error& e) {
    FAIL() << "the holder's acquire failed: " << e.what();
  }
  ASSERT_TRUE(held);
  const auto asked = Clock::now();
  auto waiting = std::async(std::launch::async, [&] {
    return next.lock("g", "x", options).acquire(Mode::exclusive, Wait::forever());
  });
  const std::string pid = holder_pid(server, "g", "x");
  ASSERT_FALSE(pid.empty());
  server.query("SELECT pg_terminate_backend(" + pid + ")");
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "still held by a dead session";
  // Said with how long it took if it fails: loaded run 50 saw a statement here go
  // unanswered for the whole op_timeout (10 s), which no other run has seen.
  Lease granted;
  try {
    granted = waiting.get();
  } catch (const Error& e) {
    FAIL() << "the waiter's acquire failed " << seconds(Clock::now() - asked)
           << " s after it was asked: " << e.what();
  }
  ASSERT_TRUE(granted);
  EXPECT_GT(granted.token(), held.token());
  // The holder learns it at its next renewal (every TTL/3), long before its TTL.
  EXPECT_TRUE(eventually([&] { return held.lost(); }, 30s));
  EXPECT_FALSE(granted.lost());
}

TEST(PostgresLease, HolderPausedPastItsTtlIsEndedByTheServerAndItsLateWriteIsFenced) {
  PostgresServer server;
  server.query(
      "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);"
      "INSERT INTO accounts VALUES (42, 100)");
  // No watchdog: nothing renews the lease, exactly as for a holder that is paused.
  ClientOptions paused = unhurried_options();
  paused.watchdog = false;
  Client sleeper = Client::open(server.uri(), paused);
  Client next = Client::open(server.uri(), unhurried_options());
  // 5 s: the test's own probes (a new session each: a fork and a SCRAM exchange) must
  // find the holder's session before its TTL ends it; beside two CPU hogs they did not
  // within 1 s.
  LockOptions options;
  options.ttl = 5s;
  Lease stale;
  try {
    stale = sleeper.lock("accounts", "acct-42", options).acquire(Mode::exclusive, Wait::none());
  } catch (const Error& e) {
    FAIL() << "the first holder's acquire failed: " << e.what();
  }
  ASSERT_TRUE(stale);
  const std::string pid = holder_pid(server, "accounts", "acct-42");
  ASSERT_FALSE(pid.empty());
  // While it holds the lock, its token is admitted.
  EXPECT_EQ(fenced_update(server, stale.token(), 90), "1");

  // The client gives the lease up on its own clock...
  EXPECT_TRUE(eventually([&] { return stale.lost(); }, options.ttl + 10s));
  // ...and the server ends the idle session (idle_session_timeout = TTL), freeing the lock.
  EXPECT_TRUE(eventually(
      [&] {
        return server.value("SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid) == "0";
      },
      options.ttl + 10s))
      << "the server kept the paused holder's session";
  // Said with how long it took if it fails: loaded run 49 saw an acquire here (or the
  // one before) fail with libpq's connect timeout, which no other run has seen.
  const auto asked = Clock::now();
  Lease fresh;
  try {
    fresh = next.lock("accounts", "acct-42", options).acquire(Mode::exclusive, Wait::up_to(10s));
  } catch (const Error& e) {
    FAIL() << "the next holder's acquire failed after " << seconds(Clock::now() - asked)
           << " s: " << e.what();
  }
  ASSERT_TRUE(fresh);
  ASSERT_GT(fresh.token(), stale.token());
  EXPECT_EQ(fenced_update(server, fresh.token(), 50), "1");

  // The paused holder wakes up and writes with its old token: no row changes.
  EXPECT_EQ(fenced_update(server, stale.token(), 0), "0");
  EXPECT_EQ(server.value("SELECT balance FROM accounts WHERE id = 42"), "50");
  // An unknown lock never admits a write.
  EXPECT_EQ(server.value("SELECT warden.fence('accounts', 'nobody', 1)"), "f");
}

TEST(PostgresLease, APooledSessionKeepsItsTtlAndIsNeverReusedAfterTheServerEndedIt) {
  // A released grant's session goes back to the pool with idle_session_timeout still at
  // the TTL, so the next grant of that TTL need not set it again. The server ends that
  // session once it has been idle a TTL: the next acquire must get a live one.
  PostgresServer server;
  Client client = Client::open(server.uri(), unhurried_options());
  LockOptions options;
  options.ttl = 1s;
  Lease first = client.lock("g", "x", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(first);
  const std::string pid = holder_pid(server, "g", "x");
  const std::uint64_t first_token = first.token();
  first.release();
  // Idle past its TTL: the server ends the pooled session.
  EXPECT_TRUE(eventually(
      [&] {
        return server.value("SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid) == "0";
      },
      10s));
  Lease second = client.lock("g", "x", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(second);
  EXPECT_GT(second.token(), first_token);
  // A grant with another TTL sets the session's idle timeout to it.
  LockOptions longer;
  longer.ttl = 20s;
  second.release();
  Lease third = client.lock("g", "y", longer).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(third);
  const std::string holder = holder_pid(server, "g", "y");
  ASSERT_FALSE(holder.empty());
  std::this_thread::sleep_for(1500ms);  // longer than the first TTL, far below this one
  EXPECT_EQ(server.value("SELECT count(*) FROM pg_stat_activity WHERE pid = " + holder), "1")
      << "the session kept the shorter idle timeout of an earlier grant";
  EXPECT_FALSE(third.lost());
}

// A try that finds the lock busy takes nothing, and its statement sets no idle timeout
// on its session either (only a grant does). The next grant of that TTL on the pooled
// session must set it: a holder that goes quiet must still lose its lock to the server.
TEST(PostgresLease, AGrantOnTheSessionOfATryThatFoundTheLockBusyStillEndsByItsTtl) {
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  // No watchdog: nothing renews the lease, as for a holder that is paused.
  ClientOptions paused = unhurried_options();
  paused.watchdog = false;
  // The try's session is pooled, and the next grant takes it (the pool hands out the
  // session given back last).
  Client sleeper = Client::open(server.uri(), paused);
  LockOptions options;
  options.ttl = 5s;  // see HolderPausedPastItsTtl... for why not shorter
  Lease busy = holder.lock("g", "x", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(busy);
  EXPECT_FALSE(sleeper.lock("g", "x", options).acquire(Mode::exclusive, Wait::none()));
  Lease quiet = sleeper.lock("g", "y", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(quiet);
  const std::string pid = holder_pid(server, "g", "y");
  ASSERT_FALSE(pid.empty());
  EXPECT_TRUE(eventually(
      [&] {
        return server.value("SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid) == "0";
      },
      options.ttl + 10s))
      << "the server kept a quiet holder's session: its grant set no idle timeout";
}

}  // namespace
}  // namespace warden::testing
