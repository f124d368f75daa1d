// End-to-end: `warden run` against wardend --users, the user and password in the URI
// (warden://USER:PASSWORD@HOST:PORT, sent as AUTH USER PASSWORD): the right user runs
// its command under the lock; a wrong password and a group outside the user's patterns
// are refused with exit status 77 and the command never runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "process.h"
#include "server/password_hash.h"
#include "support/server_process.h"

namespace warden::cli::testing {
namespace {

using namespace std::chrono_literals;
const std::string kWarden = WARDEN_CLI_PATH;

class WardenRunWithUsers : public ::testing::Test {
 protected:
  WardenRunWithUsers() {
    const auto file = dir_.path() / "users";
    std::ofstream(file) << "billing " << server::hash_password("b-pass", server::kMinimumCost)
                        << " billing lock\n";
    server_ = std::make_unique<warden::testing::Wardend>(
        std::vector<std::string>{"--users", file.string()});
  }
  std::string url(const std::string& userinfo) const {
    return "warden://" + userinfo + "@127.0.0.1:" + std::to_string(server_->port());
  }
  Outcome run_in(const std::string& userinfo, const std::string& group) {
    return run({kWarden, "run", "--url", url(userinfo), "--group", group, "--name", "n", "--",
                "echo", "ran"},
               environment({"WARDEN_URL"}));
  }

  warden::testing::TempDir dir_{"warden-cli-users"};
  std::unique_ptr<warden::testing::Wardend> server_;
};

TEST_F(WardenRunWithUsers, RightUserRunsItsCommandUnderTheLock) {
  const Outcome o = run_in("billing:b-pass", "billing");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "ran\n");
}

TEST_F(WardenRunWithUsers, WrongPasswordExits77AndRunsNothing) {
  const Outcome o = run_in("billing:wrong", "billing");
  EXPECT_EQ(o.status, 77) << o.err;
  EXPECT_EQ(o.out, "");
  const Outcome unknown = run_in("mallory:b-pass", "billing");
  EXPECT_EQ(unknown.status, 77) << unknown.err;
}

TEST_F(WardenRunWithUsers, GroupOutsideTheUsersPatternsExits77AndRunsNothing) {
  const Outcome o = run_in("billing:b-pass", "orders");
  EXPECT_EQ(o.status, 77) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_NE(o.err.find("NOPERM"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace warden::cli::testing
