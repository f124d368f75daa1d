// `warden leader`: its output format (unit), and the built binary against a real wardend
// while `warden elect` processes lead, once and with --watch.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/leader_format.h"
#include "process.h"
#include "support/redis_masters.h"
#include "support/server_process.h"
#include "support/waiting.h"

namespace warden::cli::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Args = std::vector<std::string>;
using warden::testing::TempDir;

const std::string kWarden = WARDEN_CLI_PATH;

Args clean_environment() { return environment({"WARDEN_URL", "WARDEN_TOKEN", "WARDEN_SEQUENCER"}); }

Outcome leader(const std::string& url, const Args& extra = {}) {
  Args argv = {kWarden, "leader", "--url", url, "--group", "g", "--name", "leader"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run(argv, clean_environment());
}

TEST(LeaderFormat, SaysTheTermAndValueOrNoLeader) {
  EXPECT_EQ(leader_text("g", "n", Leader{"node-a:80", 7}),
            "election g/n: term 7, leader node-a:80\n");
  EXPECT_EQ(leader_text("g", "n", std::nullopt), "election g/n: no leader\n");
  EXPECT_EQ(leader_text("g", "n", Leader{"a\nb", 1}), "election g/n: term 1, leader a\\x0ab\n")
      << "a value cannot break the one line";
}

TEST(LeaderFormat, JsonIsOneObjectOnOneLine) {
  const std::string some = leader_json("mem://", "g", "n", Leader{"a\nb", 7});
  EXPECT_EQ(some.find('\n'), some.size() - 1) << some;
  EXPECT_EQ(
      json::parse(some),
      (json{{"url", "mem://"}, {"election", "g/n"}, {"leader", {{"value", "a\nb"}, {"term", 7}}}}));
  EXPECT_EQ(json::parse(leader_json("mem://", "g", "n", std::nullopt))["leader"], nullptr);
}

TEST(WardenLeader, ShowsTheRunningLeadersValueAndTermAndNoLeaderAfter) {
  warden::testing::Wardend server;
  TempDir dir;
  const std::string ready = (dir.path() / "ready").string();
  const std::string go = (dir.path() / "go").string();
  Process elect({kWarden, "elect", "--url", server.uri(), "--group", "g", "--name", "leader",
                 "--value", "node-a:8080", "--", "sh", "-c",
                 "touch " + ready + "; while [ ! -e " + go + " ]; do sleep 0.05; done; echo " +
                     "$WARDEN_TOKEN"},
                clean_environment());
  ASSERT_TRUE(warden::testing::eventually([&] { return std::filesystem::exists(ready); }, 30s));

  const Outcome text = leader(server.uri());
  ASSERT_EQ(text.status, 0) << text.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(
      text.out, m, std::regex("election g/leader: term ([0-9]+), leader node-a:8080\n")))
      << text.out;
  const std::string term = m[1];
  const Outcome as_json = leader(server.uri(), {"--json"});
  ASSERT_EQ(as_json.status, 0) << as_json.err;
  const json j = json::parse(as_json.out);
  EXPECT_EQ(j["election"], "g/leader");
  EXPECT_EQ(j["url"], server.uri());
  EXPECT_EQ(j["leader"]["value"], "node-a:8080");
  EXPECT_EQ(j["leader"]["term"], std::stoull(term));

  std::ofstream(go).put('\n');
  const Outcome ran = elect.finish(30s);
  EXPECT_EQ(ran.status, 0) << ran.err;
  EXPECT_EQ(ran.out, term + "\n") << "CMD's WARDEN_TOKEN is the term `leader` showed";

  const Outcome after = leader(server.uri());
  EXPECT_EQ(after.status, 0) << after.err;
  EXPECT_EQ(after.out, "election g/leader: no leader\n");
  const Outcome after_json = leader(server.uri(), {"--json"});
  EXPECT_EQ(after_json.status, 0) << after_json.err;
  EXPECT_EQ(json::parse(after_json.out)["leader"], nullptr) << after_json.out;
}

// The watch's lines so far, from the file its stdout goes to.
std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(WardenLeader, WatchPrintsEachLeaderInTermOrderUntilSigterm) {
  warden::testing::Wardend server;
  TempDir dir;
  const std::filesystem::path out = dir.path() / "watch.jsonl";
  // Through a file rather than a pipe, so the test can read lines while the watch runs;
  // exec keeps the pid the watcher's.
  Process watch({"/bin/sh", "-c",
                 "exec " + kWarden + " leader --url " + server.uri() +
                     " --group g --name leader --watch --json > " + out.string()},
                clean_environment());
  ASSERT_TRUE(warden::testing::eventually([&] { return !lines_of(out).empty(); }, 30s))
      << "the watch never printed the first state";

  // Each leader stays until the watch has shown it, so no leader is folded away.
  for (const std::string value : {"one", "two"}) {
    const Outcome o =
        run({kWarden, "elect", "--url", server.uri(), "--group", "g", "--name", "leader", "--value",
             value, "--", "sh", "-c",
             "until grep -q '\"" + value + "\"' " + out.string() + "; do sleep 0.05; done"},
            clean_environment(), 60s);
    ASSERT_EQ(o.status, 0) << value << ": " << o.err;
  }
  ASSERT_TRUE(warden::testing::eventually(
      [&] { return json::parse(lines_of(out).back())["leader"].is_null(); }, 30s))
      << "the watch never saw the last leader resign";

  kill(watch.pid(), SIGTERM);
  const Outcome o = watch.finish(30s);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.err, "");

  const std::vector<std::string> lines = lines_of(out);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_TRUE(json::parse(lines.front())["leader"].is_null()) << lines.front();
  std::vector<std::string> values;
  std::uint64_t last_term = 0;
  for (const std::string& line : lines) {
    const json j = json::parse(line);
    EXPECT_EQ(j["election"], "g/leader");
    if (j["leader"].is_null()) continue;
    values.push_back(j["leader"]["value"]);
    EXPECT_GT(j["leader"]["term"].get<std::uint64_t>(), last_term) << "terms go forward";
    last_term = j["leader"]["term"];
  }
  EXPECT_EQ(values, (std::vector<std::string>{"one", "two"}));
}

TEST(WardenLeader, WatchEndsWithZeroOnSigintToo) {
  TempDir dir;
  const std::filesystem::path out = dir.path() / "watch.txt";
  Process watch({"/bin/sh", "-c",
                 "exec " + kWarden + " leader --url mem:// --group g --name leader --watch > " +
                     out.string()},
                clean_environment());
  ASSERT_TRUE(warden::testing::eventually([&] { return !lines_of(out).empty(); }, 30s));
  kill(watch.pid(), SIGINT);
  const Outcome o = watch.finish(30s);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(lines_of(out), std::vector<std::string>{"election g/leader: no leader"});
}

TEST(WardenLeader, BadInputAndEnginesWithoutElectionsAreUsageErrors) {
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"--url", "mem://", "--group", "g"}, "--name is required"},
      {{"--url", "mem://", "--name", "n"}, "--group is required"},
      {{"--url", "mem://", "--group", "a/b", "--name", "n"}, "election a/b/n: invalid_argument: "},
      {{"--url", "nosuch://x", "--group", "g", "--name", "n"},
       "invalid_argument: unknown URI scheme"},
      {{"--group", "g", "--name", "n"}, "--url: not given, and WARDEN_URL is not set"},
  };
  for (const auto& [args, expected] : cases) {
    Args argv = {kWarden, "leader"};
    argv.insert(argv.end(), args.begin(), args.end());
    const Outcome o = run(argv, clean_environment());
    EXPECT_EQ(o.status, 64) << expected << ": " << o.err;
    EXPECT_EQ(o.out, "");
    EXPECT_TRUE(contains(o.err, expected)) << o.err;
  }
  warden::testing::RedisMasters masters(3);
  const Outcome redlock = leader(masters.uri());
  EXPECT_EQ(redlock.status, 64) << redlock.err;
  EXPECT_TRUE(contains(redlock.err, "warden: election g/leader: unsupported: ")) << redlock.err;
}

TEST(WardenLeader, AStoppedServerExits69) {
  const std::uint16_t port = warden::testing::free_port();
  const Outcome o = leader("warden://127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(o.status, 69) << o.err;
  EXPECT_EQ(o.out, "");
}

}  // namespace
}  // namespace warden::cli::testing
