// End-to-end: `warden run` with --name repeated against a real wardend — a multi-lock
// taken all or nothing, in name order whatever order the names were given in.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <string>
#include <vector>

#include "inside_count.h"
#include "process.h"
#include "support/server_process.h"

namespace warden::cli::testing {
namespace {

using namespace std::chrono_literals;
using warden::testing::TempDir;
const std::string kWarden = WARDEN_CLI_PATH;

std::vector<std::string> run_args(const std::string& url, const std::vector<std::string>& names,
                                  const std::vector<std::string>& extra,
                                  const std::vector<std::string>& command) {
  std::vector<std::string> argv{kWarden, "run", "--url", url, "--group", "accounts"};
  for (const std::string& name : names) {
    argv.push_back("--name");
    argv.push_back(name);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

TEST(WardenRunMulti, OppositeOrdersNeverOverlapAndGetEveryTokenInNameOrder) {
  warden::testing::Wardend server;
  TempDir dir;
  const InsideCount inside(dir.path());
  const std::string cmd = inside.command("0.2", "echo \"$WARDEN_TOKEN|$WARDEN_SEQUENCER\"");
  std::vector<std::future<Outcome>> runs;
  for (int i = 0; i < 6; ++i) {
    const std::vector<std::string> names = i % 2 == 0 ? std::vector<std::string>{"alice", "bob"}
                                                      : std::vector<std::string>{"bob", "alice"};
    runs.push_back(std::async(std::launch::async, [&, names] {
      return run(run_args(server.uri(), names, {"--wait", "30s"}, {"sh", "-c", cmd}),
                 environment({"WARDEN_URL"}), 60s);
    }));
  }
  std::vector<std::uint64_t> alice_tokens;
  for (auto& r : runs) {
    const Outcome o = r.get();
    ASSERT_EQ(o.status, 0) << o.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(
        o.out, m,
        std::regex(
            "([0-9]+),([0-9]+)\\|accounts/alice:exclusive:\\1 accounts/bob:exclusive:\\2\n")))
        << o.out;
    alice_tokens.push_back(std::stoull(m[1]));
  }
  std::sort(alice_tokens.begin(), alice_tokens.end());
  EXPECT_EQ(std::adjacent_find(alice_tokens.begin(), alice_tokens.end()), alice_tokens.end())
      << "every grant of alice has a token of its own";
  const InsideCount::Seen seen = inside.seen();
  EXPECT_EQ(seen.commands, 6);
  EXPECT_EQ(seen.most, 1) << "two commands held the accounts at once";
}

TEST(WardenRunMulti, AMemberHeldElsewhereTimesOutAndLeavesTheOthersFree) {
  warden::testing::Wardend server;
  TempDir dir;
  const std::string ready = (dir.path() / "ready").string();
  const std::string go = (dir.path() / "go").string();
  // Holds bob until the test creates `go`.
  Process holder(
      run_args(server.uri(), {"bob"}, {},
               {"sh", "-c", "touch " + ready + "; while [ ! -e " + go + " ]; do sleep 0.05; done"}),
      environment({"WARDEN_URL"}));
  for (int i = 0; i < 400 && !std::filesystem::exists(ready); ++i)
    std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(std::filesystem::exists(ready));

  const Outcome both = run(run_args(server.uri(), {"alice", "bob"}, {"--wait", "300ms"}, {"true"}),
                           environment({"WARDEN_URL"}));
  EXPECT_EQ(both.status, 75) << both.err;
  EXPECT_TRUE(contains(both.err, "accounts/{alice,bob}")) << both.err;
  const Outcome alice = run(run_args(server.uri(), {"alice"}, {"--wait", "0"}, {"true"}),
                            environment({"WARDEN_URL"}));
  EXPECT_EQ(alice.status, 0) << "alice was let go: " << alice.err;

  std::ofstream(go).put('\n');
  EXPECT_EQ(holder.finish(30s).status, 0);
}

TEST(WardenRunMulti, BadCombinationsAreUsageErrors) {
  warden::testing::Wardend server;
  const Outcome twice =
      run(run_args(server.uri(), {"alice", "alice"}, {}, {"true"}), environment({"WARDEN_URL"}));
  EXPECT_EQ(twice.status, 64) << twice.err;
  EXPECT_TRUE(contains(twice.err, "twice")) << twice.err;
  const Outcome permits =
      run(run_args(server.uri(), {"alice", "bob"}, {"--permits", "2"}, {"true"}),
          environment({"WARDEN_URL"}));
  EXPECT_EQ(permits.status, 64) << permits.err;
  EXPECT_TRUE(contains(permits.err, "a semaphore has one name")) << permits.err;
}

}  // namespace
}  // namespace warden::cli::testing
