// tests/server/users_test.cc — wardend's named users at the dispatcher, with fake time
// and no sockets: AUTH user password (checked by the real libsodium, at its minimum
// cost), rights per command, group patterns, NOPERM changing nothing, and a reloaded
// users table applied to connections already authenticated.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dispatcher_test_support.h"
#include "server/dispatcher.h"
#include "server/password_hash.h"
#include "server/users_file.h"
#include "test_password_hashes.h"

namespace warden::server {
namespace {

using Outcome = Dispatcher::Outcome;

const std::string kWrong = "-WRONGPASS invalid user name or password\r\n";

std::shared_ptr<const UserTable> users(const std::vector<std::string>& lines) {
  std::string text = "# test users\n";
  for (const auto& l : lines) text += l + "\n";
  return std::make_shared<const UserTable>(parse_users(text, "users.txt"));
}

// name password-hash groups rights, the hash made from `password`.
std::string line(const std::string& name, const std::string& password, const std::string& groups,
                 const std::string& rights) {
  return name + " " + hash_of(password) + " " + groups + " " + rights;
}

std::shared_ptr<const UserTable> standard_users() {
  return users({line("billing", "b-pass", "billing,invoices-*", "lock"),
                line("auditor", "a-pass", "*", "inspect"), line("ops", "o-pass", "ops?", "admin")});
}

class Harness {
 public:
  explicit Harness(std::shared_ptr<const UserTable> table, std::string password = {}) {
    DispatcherConfig config;
    config.password = std::move(password);
    config.version = "9.9.9";
    config.users = std::move(table);
    d = std::make_unique<Dispatcher>(std::move(config), nullptr, nullptr);
    for (ConnId c = 1; c <= 4; ++c) EXPECT_TRUE(d->connect(c));
  }

  Outcome execute(ConnId conn, const std::vector<std::string>& args, std::string& reply) {
    std::vector<std::string_view> views(args.begin(), args.end());
    return d->execute(conn, views, at(0), reply);
  }

  // A request answered at once.
  std::string call(ConnId conn, const std::vector<std::string>& args) {
    std::string reply;
    EXPECT_EQ(execute(conn, args, reply), Outcome::replied) << args[0];
    return reply;
  }

  // AUTH user password: parks, is checked as the shell would (off the loop there), and
  // answered by a wakeup. Returns that answer.
  std::string auth(ConnId conn, const std::string& user, const std::string& password) {
    std::string reply;
    EXPECT_EQ(execute(conn, {"AUTH", user, password}, reply), Outcome::parked) << reply;
    EXPECT_EQ(reply, "");
    run_checks();
    const auto wakeups = d->take_wakeups();
    EXPECT_EQ(wakeups.size(), 1u);
    if (wakeups.size() != 1) return "<no answer>";
    EXPECT_EQ(wakeups[0].conn, conn);
    return wakeups[0].reply;
  }

  void run_checks() {
    for (const auto& check : d->take_auth_checks()) {
      checked_hashes.push_back(check.hash);
      d->auth_checked(check.id, verify_password(check.hash, check.password));
    }
  }

  std::unique_ptr<Dispatcher> d;
  std::vector<std::string> checked_hashes;
};

bool is_grant(const std::string& reply) { return reply.starts_with("*3\r\n:"); }

TEST(UsersTest, NamedUserAuthenticatesWithItsPasswordOnly) {
  Harness h(standard_users());
  EXPECT_EQ(h.call(1, {"PING"}), "-NOAUTH authentication required\r\n");
  EXPECT_EQ(h.auth(1, "billing", "a-pass"), kWrong) << "another user's password";
  EXPECT_EQ(h.call(1, {"PING"}), "-NOAUTH authentication required\r\n");
  EXPECT_EQ(h.auth(1, "billing", "b-pass"), kOk);
  EXPECT_EQ(h.call(1, {"PING"}), "+PONG\r\n");
}

TEST(UsersTest, UnknownUserIsAnsweredLikeAWrongPasswordAfterTheSameKindOfCheck) {
  Harness h(standard_users());
  EXPECT_EQ(h.auth(1, "mallory", "b-pass"), kWrong);
  // The decoy: a real argon2id hash was checked, not a shortcut taken.
  ASSERT_EQ(h.checked_hashes.size(), 1u);
  EXPECT_TRUE(h.checked_hashes[0].starts_with("$argon2id$"));
  // Even the password of the user whose hash serves as the decoy opens nothing.
  const std::string decoy_owner_password = "b-pass";
  EXPECT_EQ(h.auth(1, "nobody", decoy_owner_password), kWrong);
  EXPECT_EQ(h.call(1, {"PING"}), "-NOAUTH authentication required\r\n");
}

TEST(UsersTest, OneArgumentAuthIsTheRequirepassUserOrWrongpassWithoutOne) {
  {
    Harness h(standard_users());
    EXPECT_EQ(h.call(1, {"AUTH", "b-pass"}), kWrong);
    EXPECT_EQ(h.call(1, {"AUTH", "default", "b-pass"}), kWrong);
    EXPECT_TRUE(h.d->take_auth_checks().empty());
  }
  Harness h(standard_users(), "master");
  EXPECT_EQ(h.call(1, {"AUTH", "master"}), kOk);
  EXPECT_EQ(h.call(2, {"AUTH", "default", "master"}), kOk);
  // The default user has every right on every group.
  EXPECT_TRUE(is_grant(h.call(1, {"ACQUIRE", "anything/k", "x", "1000"})));
  EXPECT_TRUE(h.call(2, {"INFO"}).starts_with("$"));
  EXPECT_EQ(h.auth(3, "billing", "b-pass"), kOk);
}

TEST(UsersTest, LockRightCoversLockCommandsOnMatchingGroupsOnly) {
  Harness h(standard_users());
  ASSERT_EQ(h.auth(1, "billing", "b-pass"), kOk);
  EXPECT_TRUE(is_grant(h.call(1, {"ACQUIRE", "billing/a", "x", "1000"})));
  EXPECT_TRUE(is_grant(h.call(1, {"ACQUIRE", "invoices-2026/a", "x", "1000"})));
  EXPECT_EQ(h.call(1, {"CHECK", "billing/a", "x", "1"}), ":1\r\n");
  EXPECT_EQ(h.call(1, {"ACQUIRE", "orders/a", "x", "1000"}),
            "-NOPERM user 'billing' has no access to group 'orders'\r\n");
  EXPECT_EQ(h.call(1, {"ACQUIRE", "invoices/a", "x", "1000"}),
            "-NOPERM user 'billing' has no access to group 'invoices'\r\n")
      << "invoices-* needs the dash";
  EXPECT_EQ(h.call(1, {"ACQUIRESET", "1000", "2", "billing/a", "x", "invoices/a", "x"}),
            "-NOPERM user 'billing' has no access to group 'invoices'\r\n")
      << "every member's group is checked";
  EXPECT_EQ(h.call(1, {"INSPECT", "billing/a"}),
            "-NOPERM user 'billing' has no inspect right for INSPECT\r\n");
  EXPECT_EQ(h.call(1, {"LIST", "billing"}),
            "-NOPERM user 'billing' has no inspect right for LIST\r\n");
  EXPECT_EQ(h.call(1, {"INFO"}), "-NOPERM user 'billing' has no inspect right for INFO\r\n");
  EXPECT_EQ(h.call(1, {"WATCH", "billing/a"}),
            "-NOPERM user 'billing' has no inspect right for WATCH\r\n");
  // Commands that need no right.
  EXPECT_EQ(h.call(1, {"PING"}), "+PONG\r\n");
  EXPECT_TRUE(h.call(1, {"HELLO"}).starts_with("*8\r\n"));
}

TEST(UsersTest, NopermChangesNothing) {
  Harness h(standard_users(), "master");
  ASSERT_EQ(h.call(1, {"AUTH", "master"}), kOk);
  const std::string held = h.call(1, {"ACQUIRE", "orders/a", "x", "1000"});
  ASSERT_TRUE(is_grant(held));
  const std::string secret = held.substr(held.size() - 34, 32);
  ASSERT_EQ(h.auth(2, "billing", "b-pass"), kOk);
  const auto before = h.d->stats();
  // A lock command on a group outside the patterns, even with the holder's secret.
  EXPECT_TRUE(h.call(2, {"RELEASE", "orders/a", "1", secret}).starts_with("-NOPERM"));
  EXPECT_TRUE(h.call(2, {"RENEW", "orders/a", "1", secret, "5000"}).starts_with("-NOPERM"));
  EXPECT_TRUE(
      h.call(2, {"ACQUIRE", "orders/b", "x", "1000", "WAIT", "100"}).starts_with("-NOPERM"));
  const auto after = h.d->stats();
  EXPECT_EQ(after.table.keys, before.table.keys);
  EXPECT_EQ(after.table.holders, before.table.holders);
  EXPECT_EQ(after.grants, before.grants);
  EXPECT_EQ(h.call(1, {"CHECK", "orders/a", "x", "1"}), ":1\r\n");
}

TEST(UsersTest, InspectRightCoversInspectListAndInfoButNoLocks) {
  Harness h(users({line("auditor", "a-pass", "billing", "inspect")}));
  ASSERT_EQ(h.auth(1, "auditor", "a-pass"), kOk);
  EXPECT_TRUE(h.call(1, {"INSPECT", "billing/a"}).starts_with("*6\r\n"));
  EXPECT_TRUE(h.call(1, {"LIST", "billing"}).starts_with("*2\r\n"));
  EXPECT_TRUE(h.call(1, {"INFO"}).starts_with("$"));
  // LIST and INSPECT outside the patterns: NOPERM, so nothing about other groups leaks.
  EXPECT_EQ(h.call(1, {"LIST", "orders"}),
            "-NOPERM user 'auditor' has no access to group 'orders'\r\n");
  EXPECT_TRUE(h.call(1, {"INSPECT", "orders/a"}).starts_with("-NOPERM"));
  EXPECT_TRUE(h.call(1, {"WATCH", "orders/a"}).starts_with("-NOPERM"));
  EXPECT_EQ(h.call(1, {"ACQUIRE", "billing/a", "x", "1000"}),
            "-NOPERM user 'auditor' has no lock right for ACQUIRE\r\n");
  EXPECT_TRUE(h.d->table().empty());
  EXPECT_EQ(h.call(1, {"WATCH", "billing/a"}), "+OK\r\n");
}

TEST(UsersTest, AdminHasEveryRightButStillOnlyItsGroups) {
  Harness h(standard_users());
  ASSERT_EQ(h.auth(1, "ops", "o-pass"), kOk);
  EXPECT_TRUE(is_grant(h.call(1, {"ACQUIRE", "ops1/a", "x", "1000"})));
  EXPECT_TRUE(h.call(1, {"INSPECT", "ops1/a"}).starts_with("*6\r\n"));
  EXPECT_TRUE(h.call(1, {"INFO"}).starts_with("$"));
  EXPECT_TRUE(h.call(1, {"ACQUIRE", "ops12/a", "x", "1000"}).starts_with("-NOPERM"))
      << "? is exactly one character";
}

TEST(UsersTest, BadKeyIsStillInvalidNotNoperm) {
  Harness h(standard_users());
  ASSERT_EQ(h.auth(1, "billing", "b-pass"), kOk);
  EXPECT_TRUE(h.call(1, {"ACQUIRE", "no-slash", "x", "1000"}).starts_with("-INVALID"));
  EXPECT_TRUE(h.call(1, {"ACQUIRE", "b@d/k", "x", "1000"}).starts_with("-INVALID"));
}

TEST(UsersTest, ReloadAppliesNewRightsToTheNextCommandAndRemovedUsersMustAuthenticateAgain) {
  Harness h(standard_users());
  ASSERT_EQ(h.auth(1, "billing", "b-pass"), kOk);
  ASSERT_EQ(h.auth(2, "auditor", "a-pass"), kOk);
  EXPECT_TRUE(h.call(1, {"ACQUIRE", "orders/a", "x", "1000"}).starts_with("-NOPERM"));

  h.d->set_users(users({line("billing", "b-pass", "orders", "lock,inspect")}));
  EXPECT_TRUE(is_grant(h.call(1, {"ACQUIRE", "orders/a", "x", "1000"})));
  EXPECT_TRUE(h.call(1, {"ACQUIRE", "billing/a", "x", "1000"}).starts_with("-NOPERM"));
  EXPECT_EQ(h.call(2, {"INFO"}), "-NOAUTH user 'auditor' no longer exists; authenticate again\r\n");
  EXPECT_EQ(h.call(2, {"PING"}), "-NOAUTH authentication required\r\n");
  EXPECT_EQ(h.auth(2, "auditor", "a-pass"), kWrong);
}

TEST(UsersTest, FailedAuthLeavesAnAuthenticatedConnectionAsItWas) {
  Harness h(standard_users());
  ASSERT_EQ(h.auth(1, "billing", "b-pass"), kOk);
  EXPECT_EQ(h.auth(1, "auditor", "wrong"), kWrong);
  EXPECT_TRUE(is_grant(h.call(1, {"ACQUIRE", "billing/a", "x", "1000"})));
}

TEST(UsersTest, PendingChecksAreBoundedAndADisconnectDropsItsResult) {
  DispatcherConfig config;
  config.users = standard_users();
  config.limits.max_pending_auth = 2;
  Dispatcher d(std::move(config), nullptr, nullptr);
  for (ConnId c = 1; c <= 4; ++c) ASSERT_TRUE(d.connect(c));
  const std::vector<std::string_view> auth = {"AUTH", "billing", "b-pass"};
  std::string reply;
  EXPECT_EQ(d.execute(1, auth, at(0), reply), Outcome::parked);
  EXPECT_EQ(d.execute(2, auth, at(0), reply), Outcome::parked);
  EXPECT_EQ(d.execute(3, auth, at(0), reply), Outcome::replied);
  EXPECT_EQ(reply, "-LIMIT too many AUTH checks in progress; retry later\r\n");
  auto checks = d.take_auth_checks();
  ASSERT_EQ(checks.size(), 2u);
  d.disconnect(1, at(0));
  for (const auto& c : checks) d.auth_checked(c.id, true);
  const auto wakeups = d.take_wakeups();
  ASSERT_EQ(wakeups.size(), 1u);
  EXPECT_EQ(wakeups[0].conn, 2u);
  EXPECT_EQ(wakeups[0].reply, kOk);
}

TEST(UsersTest, HalfCloseDuringACheckAnswersAtOnceAndAuthenticatesNobody) {
  Harness h(standard_users());
  std::string reply;
  ASSERT_EQ(h.execute(1, {"AUTH", "billing", "b-pass"}, reply), Outcome::parked);
  h.d->cancel_parked(1, at(0));
  const auto wakeups = h.d->take_wakeups();
  ASSERT_EQ(wakeups.size(), 1u);
  EXPECT_TRUE(wakeups[0].reply.starts_with("-ERR AUTH cancelled"));
  h.run_checks();
  EXPECT_TRUE(h.d->take_wakeups().empty());
  EXPECT_EQ(h.call(1, {"PING"}), "-NOAUTH authentication required\r\n");
}

TEST(UsersTest, WithoutAUsersFileTheUserNameIsIgnoredAsBefore) {
  DispatcherConfig config;
  config.password = "s3cret";
  Dispatcher d(std::move(config), nullptr, nullptr);
  ASSERT_TRUE(d.connect(1));
  const std::vector<std::string_view> auth = {"AUTH", "anyone", "s3cret"};
  std::string reply;
  EXPECT_EQ(d.execute(1, auth, at(0), reply), Outcome::replied);
  EXPECT_EQ(reply, kOk);
}

}  // namespace
}  // namespace warden::server
