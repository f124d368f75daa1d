// End-to-end: `warden run --permits N` against a real wardend — commands in separate
// processes, at most N of them inside at once, each with its own fencing token.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "inside_count.h"
#include "process.h"
#include "support/server_process.h"
#include "support/wardend_probe.h"

namespace warden::cli::testing {
namespace {

using namespace std::chrono_literals;
const std::string kWarden = WARDEN_CLI_PATH;

using warden::testing::TempDir;

TEST(WardenRunPermits, AtMostNCommandsRunAtOnceEachWithItsOwnToken) {
  warden::testing::Wardend server;
  TempDir dir;
  const InsideCount inside(dir.path());
  const std::string cmd = inside.command("0.3", "echo $WARDEN_SEQUENCER");
  std::vector<std::future<Outcome>> runs;
  for (int i = 0; i < 5; ++i) {
    runs.push_back(std::async(std::launch::async, [&] {
      return run({kWarden, "run", "--url", server.uri(), "--group", "jobs", "--name", "encode",
                  "--permits", "2", "--wait", "20s", "--", "sh", "-c", cmd},
                 environment({"WARDEN_URL"}), 40s);
    }));
  }
  std::set<std::string> tokens;
  for (auto& r : runs) {
    const Outcome o = r.get();
    ASSERT_EQ(o.status, 0) << o.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(o.out, m, std::regex("jobs/encode:shared:([0-9]+)\n"))) << o.out;
    tokens.insert(m[1]);
  }
  EXPECT_EQ(tokens.size(), 5u) << "every grant has a token of its own";
  const InsideCount::Seen seen = inside.seen();
  EXPECT_EQ(seen.commands, 5);
  EXPECT_GE(seen.most, 1);
  EXPECT_LE(seen.most, 2) << "more commands inside than permits";
}

TEST(WardenRunPermits, AnotherNumberOfPermitsWhileHeldIsAUsageError) {
  warden::testing::Wardend server;
  Process holder({kWarden, "run", "--url", server.uri(), "--group", "g", "--name", "s", "--permits",
                  "2", "--", "sleep", "3"},
                 environment({"WARDEN_URL"}));
  // Once the holder is in (wardend shows its grant), a try with another number is refused.
  const warden::testing::WardendProbe probe(server.port());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (probe.inspect("g/s").holder_tokens.empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_FALSE(probe.inspect("g/s").holder_tokens.empty()) << "the holder never got its permit";
  const Outcome other = run({kWarden, "run", "--url", server.uri(), "--group", "g", "--name", "s",
                             "--permits", "3", "--wait", "0", "--", "true"},
                            environment({"WARDEN_URL"}));
  EXPECT_EQ(other.status, 64) << other.err;
  EXPECT_TRUE(contains(other.err, "invalid_argument: ")) << other.err;
  EXPECT_TRUE(contains(other.err, "another number of permits")) << other.err;
  EXPECT_EQ(holder.finish(10s).status, 0);
}

TEST(WardenRunPermits, BadPermitsAreUsageErrorsBeforeAnyIo) {
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--permits", "0"},
                                                {"--permits", "1000001"},
                                                {"--permits", "two"},
                                                {"--permits", "2", "--shared"}}) {
    std::vector<std::string> argv = {kWarden,   "run", "--url",  "mem://",
                                     "--group", "g",   "--name", "n"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"--", "echo", "ran"});
    const Outcome o = run(argv, environment({"WARDEN_URL"}));
    EXPECT_EQ(o.status, 64) << extra[1] << ": " << o.err;
    EXPECT_EQ(o.out, "") << extra[1];
  }
}

TEST(WardenRunPermits, OnePermitRunsCmdWithASemaphoresSequencer) {
  const Outcome o = run({kWarden, "run", "--url", "mem://", "--group", "g", "--name", "n",
                         "--permits", "1", "-v", "--", "sh", "-c", "echo $WARDEN_SEQUENCER"},
                        environment({"WARDEN_URL"}));
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(std::regex_match(o.out, std::regex("g/n:shared:[0-9]+\n"))) << o.out;
  EXPECT_TRUE(contains(o.err, "granted g/n 1 of 1 permits, token ")) << o.err;
}

}  // namespace
}  // namespace warden::cli::testing
