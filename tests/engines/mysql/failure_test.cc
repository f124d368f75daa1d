// mysql:// when sessions, holders and the server fail, against a real MariaDB: the
// lease is the session, so ending it frees the lock; a holder that stops renewing is
// disconnected by the server after its TTL and fenced off by warden_fence(); tokens
// survive a crash; refused credentials and missing rights are clear errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "cli/process.h"
#include "core/engine.h"
#include "core/uri.h"
#include "engines/mysql/mysql_engine.h"
#include "support/mariadb_server.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

// Bound for what should happen "soon" on a loaded sanitizer build.
constexpr auto kPatience = 10s;

Errc open_error(const std::string& uri, std::string* message = nullptr) {
  try {
    Client::open(uri);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "opened " << uri;
  return Errc::internal;
}

bool eventually(const std::function<bool()>& pred, Clock::duration timeout = kPatience) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

TEST(MysqlFailure, KillingTheHoldersSessionFreesTheLockAtOnceAndTheHolderLosesIt) {
  MariaDbServer server;
  ClientOptions options;
  options.lock_defaults.ttl = 30s;  // nothing here waits for a TTL
  options.renew_interval = 100ms;
  Client holder = Client::open(server.uri(), options);
  Client other = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto session = server.holder_session("g", "x");
  ASSERT_TRUE(session);

  server.query("KILL " + std::to_string(*session));
  // Free long before the 30 s TTL: the session was the lease.
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(kPatience));
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), held.token());
  EXPECT_TRUE(eventually([&] { return held.lost(); })) << "the next renewal finds it gone";
  EXPECT_FALSE(holder.check(held.sequencer()));
  EXPECT_TRUE(other.check(next.sequencer()));
}

// The core never releases a grant that a renewal reported lost, so the engine must not
// keep it: a record kept for it would stay for the client's life. Its release finds
// nothing and returns, as for any grant the server no longer holds.
TEST(MysqlFailure, AGrantReportedLostIsForgottenByTheEngine) {
  MariaDbServer server;
  auto engine = engines::mysql::open(core::Uri::parse(server.uri()), ClientOptions{});
  core::AcquireRequest request;
  request.key = core::LockKey{"g", "x"};
  request.options.ttl = 60s;  // the lost grant's lease has long to run
  request.deadline = Clock::time_point::min();
  const auto granted = engine->acquire(request);
  ASSERT_TRUE(granted);
  const auto session = server.holder_session("g", "x");
  ASSERT_TRUE(session);
  server.query("KILL CONNECTION " + std::to_string(*session));
  const core::GrantRef grants[] = {granted->grant};
  const auto renewed = engine->renew(grants);
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_FALSE(renewed[0].expires || renewed[0].undecided)
      << "a grant whose session was killed was not reported lost";
  EXPECT_NO_THROW(engine->release(granted->grant))
      << "the engine still keeps a grant it reported lost";
}

TEST(MysqlFailure, AHolderSilentPastItsTtlIsDisconnectedByTheServerAndFencedOff) {
  MariaDbServer server;
  server.query(
      "CREATE TABLE warden.accounts (id INT PRIMARY KEY, balance INT) ENGINE=InnoDB; "
      "INSERT INTO warden.accounts VALUES (42, 100)");
  // No watchdog: the holder stops talking, as a paused process would.
  ClientOptions silent;
  silent.watchdog = false;
  silent.lock_defaults.ttl = 1s;
  Client holder = Client::open(server.uri(), silent);
  Client next_client = Client::open(server.uri());
  Lease held = holder.lock("accounts", "acct-42").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint64_t late_token = held.token();
  const auto session = server.holder_session("accounts", "acct-42");
  ASSERT_TRUE(session);
  // Written as a user's service would write it, and sent by MariaDB's own `mariadb`
  // client, not by anything of warden's: the fence is plain SQL for any client.
  const auto fenced_update = [&](std::uint64_t token, int balance) -> std::string {
    const std::string sql = "UPDATE warden.accounts SET balance = " + std::to_string(balance) +
                            " WHERE id = 42 AND warden.warden_fence('accounts', 'acct-42', " +
                            std::to_string(token) + "); SELECT ROW_COUNT()";
    const auto outcome =
        cli::testing::run({"/usr/bin/mariadb", "--no-defaults", "--protocol=TCP", "-h", "127.0.0.1",
                           "-P", std::to_string(server.port()), "-u", "warden", "-psecret", "-D",
                           "warden", "-N", "-B", "-e", sql},
                          cli::testing::environment({}));
    std::string text = outcome.out;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return outcome.status == 0 ? text : "mariadb failed: " + outcome.err;
  };
  ASSERT_EQ(fenced_update(late_token, 90), "1");

  // The client gives the lease up on its own clock, no later than the server can.
  ASSERT_TRUE(eventually([&] { return held.lost(); }));
  // The server closes the idle session (wait_timeout = the TTL in whole seconds) and
  // the lock with it, while the holder still has its Lease object.
  ASSERT_TRUE(eventually([&] {
    return !server.scalar("SELECT ID FROM information_schema.PROCESSLIST WHERE ID = " +
                          std::to_string(*session));
  })) << "the server kept the silent session";
  Lease next = next_client.lock("accounts", "acct-42").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), late_token);
  ASSERT_EQ(fenced_update(next.token(), 80), "1");

  // The late holder's write, fenced with its old token, changes no row.
  EXPECT_EQ(fenced_update(late_token, 999), "0");
  EXPECT_EQ(server.scalar("SELECT balance FROM warden.accounts WHERE id = 42"), "80");
}

TEST(MysqlFailure, AWaiterWhoseServerIsKilledGetsUnavailable) {
  MariaDbServer server;
  Client holder = Client::open(server.uri());
  Client waiter = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = std::async(std::launch::async, [&] {
    try {
      Lease granted = waiter.lock("g", "x").acquire(Mode::exclusive, Wait::forever());
      (void)granted;
    } catch (const Error& e) {
      return e.code();
    }
    return Errc::internal;  // granted: wrong
  });
  // The waiter opens a session first (support/waiting.h, kQueued).
  ASSERT_TRUE(eventually([&] { return server.waiting_sessions("g", "x") == 1; }, 30s));
  server.kill9();
  ASSERT_EQ(waiting.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(waiting.get(), Errc::unavailable);
}

TEST(MysqlFailure, TokensNeverGoBackAcrossAServerCrash) {
  MariaDbServer server;
  std::uint64_t last = 0;
  {
    Client client = Client::open(server.uri());
    for (int i = 0; i < 3; ++i) {
      Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
      ASSERT_TRUE(lease);
      EXPECT_GT(lease.token(), last);
      last = lease.token();
    }
  }
  server.kill9();  // no shutdown work: only what InnoDB committed survives
  server.start();
  Client client = Client::open(server.uri());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_GT(lease.token(), last);
}

TEST(MysqlFailure, TokensNeverGoBackAcrossAServerCrashRightAfterASequenceRefill) {
  // The sequence writes its table once per CACHE values, and that write is in the redo
  // log only with the next flush: the engine forces one before telling a token of a new
  // block. A small cache makes the grants cross refills; the crash comes a few grants
  // after the last one, well within InnoDB's once-a-second background flush.
  MariaDbServer server;
  std::uint64_t last = 0;
  Client::open(server.uri());  // creates the registry
  server.query("ALTER SEQUENCE warden.warden_tokens CACHE 10");
  for (int round = 0; round < 3; ++round) {
    {
      Client client = Client::open(server.uri());
      for (int i = 0; i < 25; ++i) {
        Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
        ASSERT_TRUE(lease);
        ASSERT_GT(lease.token(), last);
        last = lease.token();
      }
      server.kill9();
    }
    server.start();
  }
  Client client = Client::open(server.uri());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_GT(lease.token(), last);
}

TEST(MysqlFailure, AWrongPasswordIsPermissionDenied) {
  MariaDbServer server;
  std::string message;
  EXPECT_EQ(open_error(server.uri_as("warden", "wrong"), &message), Errc::permission_denied);
  EXPECT_NE(message.find("Access denied"), std::string::npos) << message;
  EXPECT_EQ(message.find("wrong"), std::string::npos) << "the password is never shown";
}

TEST(MysqlFailure, AnUnknownDatabaseIsAnInvalidArgument) {
  MariaDbServer server;
  std::string message;
  EXPECT_EQ(open_error(server.uri_as("root", "", "nosuchdb"), &message), Errc::invalid_argument);
  EXPECT_NE(message.find("nosuchdb"), std::string::npos) << message;
}

TEST(MysqlFailure, AUserWithoutCreateRightsIsToldWhichPrivilegeIsMissing) {
  MariaDbServer server;
  server.query(
      "CREATE USER 'reader'@'%' IDENTIFIED BY 'pw'; "
      "GRANT SELECT, INSERT, UPDATE ON warden.* TO 'reader'@'%'");
  std::string message;
  EXPECT_EQ(open_error(server.uri_as("reader", "pw"), &message), Errc::permission_denied);
  EXPECT_NE(message.find("CREATE"), std::string::npos) << message;
  EXPECT_NE(message.find("warden_locks"), std::string::npos) << message;
  // Nothing was created.
  EXPECT_FALSE(server.lock_id("g", "x"));

  // Once an account with the rights installed the registry, the reader can lock.
  Client::open(server.uri());
  server.query("GRANT EXECUTE ON warden.* TO 'reader'@'%'");
  Client reader = Client::open(server.uri_as("reader", "pw"));
  EXPECT_TRUE(reader.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
}

}  // namespace
}  // namespace warden::testing
