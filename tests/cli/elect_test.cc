// End-to-end tests of `warden elect`: the built binary against a real wardend (started on
// loopback by tests/support), so that candidates are separate processes; and against
// mem:// for what needs no second process.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "inside_count.h"
#include "process.h"
#include "support/redis_masters.h"
#include "support/server_process.h"
#include "support/waiting.h"
#include "support/wardend_probe.h"

namespace warden::cli::testing {
namespace {

using namespace std::chrono_literals;
using Args = std::vector<std::string>;
using warden::testing::TempDir;

const std::string kWarden = WARDEN_CLI_PATH;

// The environment a `warden` child gets: none of the variables warden reads or sets.
Args clean_environment() { return environment({"WARDEN_URL", "WARDEN_TOKEN", "WARDEN_SEQUENCER"}); }

// `warden elect --url URL --group g --name leader EXTRA... -- CMD...`
Args elect_args(const std::string& url, const Args& extra, const Args& cmd) {
  Args argv = {kWarden, "elect", "--url", url, "--group", "g", "--name", "leader"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

// A CMD that says it leads (creates `ready`), then runs until the test creates `go`,
// then prints its term.
Args lead_until(const TempDir& dir) {
  const std::string ready = (dir.path() / "ready").string();
  const std::string go = (dir.path() / "go").string();
  return {
      "sh", "-c",
      "touch " + ready + "; while [ ! -e " + go + " ]; do sleep 0.05; done; echo $WARDEN_TOKEN"};
}

bool becomes_ready(const TempDir& dir) {
  return warden::testing::eventually([&] { return std::filesystem::exists(dir.path() / "ready"); },
                                     30s);
}

void let_go(const TempDir& dir) { std::ofstream(dir.path() / "go").put('\n'); }

TEST(WardenElect, TwoCandidatesNeverLeadAtOnceAndTheSecondLeadsWithAHigherTerm) {
  warden::testing::Wardend server;
  TempDir dir;
  const InsideCount inside(dir.path());
  const std::string cmd = inside.command("1", "echo $WARDEN_TOKEN $WARDEN_SEQUENCER");
  Process first(elect_args(server.uri(), {"--value", "first"}, {"sh", "-c", cmd}),
                clean_environment());
  // The second candidate campaigns only once the first leads, so it must wait its turn.
  const warden::testing::WardendProbe probe(server.port());
  ASSERT_TRUE(warden::testing::eventually(
      [&] { return !probe.inspect("g/leader").holder_tokens.empty(); }, 30s));
  Process second(elect_args(server.uri(), {"--value", "second"}, {"sh", "-c", cmd}),
                 clean_environment());

  const Outcome one = first.finish(60s);
  const Outcome two = second.finish(60s);
  ASSERT_EQ(one.status, 0) << one.err;
  ASSERT_EQ(two.status, 0) << two.err;
  const std::regex line("([0-9]+) g/leader:exclusive:([0-9]+)\n");
  std::smatch m1;
  std::smatch m2;
  ASSERT_TRUE(std::regex_match(one.out, m1, line)) << one.out;
  ASSERT_TRUE(std::regex_match(two.out, m2, line)) << two.out;
  EXPECT_EQ(m1[1], m1[2]) << "WARDEN_TOKEN is the term in the sequencer";
  EXPECT_EQ(m2[1], m2[2]);
  EXPECT_LT(std::stoull(m1[1]), std::stoull(m2[1])) << "terms increase from leader to leader";

  const InsideCount::Seen seen = inside.seen();
  EXPECT_EQ(seen.commands, 2);
  EXPECT_EQ(seen.most, 1) << "both candidates ran CMD at once";
  EXPECT_TRUE(probe.inspect("g/leader").holder_tokens.empty()) << "the last leader resigned";
}

TEST(WardenElect, WaitRunningOutWhileAnotherLeadsExits75AndLeavesNoTrace) {
  warden::testing::Wardend server;
  TempDir dir;
  Process leader(elect_args(server.uri(), {}, lead_until(dir)), clean_environment());
  ASSERT_TRUE(becomes_ready(dir));

  const Outcome o =
      run(elect_args(server.uri(), {"--wait", "200ms"}, {"echo", "ran"}), clean_environment());
  EXPECT_EQ(o.status, 75) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "warden: campaign for g/leader: not granted within 200ms\n");
  const warden::testing::WardendProbe probe(server.port());
  EXPECT_EQ(probe.inspect("g/leader").waiters, 0u) << "the campaign is still queued";
  EXPECT_EQ(probe.inspect("g/leader").holder_tokens.size(), 1u);

  let_go(dir);
  EXPECT_EQ(leader.finish(30s).status, 0);
}

TEST(WardenElect, ASignalWhileWaitingToLeadEndsTheCampaignWithoutATrace) {
  warden::testing::Wardend server;
  TempDir dir;
  Process leader(elect_args(server.uri(), {}, lead_until(dir)), clean_environment());
  ASSERT_TRUE(becomes_ready(dir));
  const warden::testing::WardendProbe probe(server.port());

  Process candidate(elect_args(server.uri(), {}, {"echo", "ran"}), clean_environment());
  ASSERT_TRUE(
      warden::testing::eventually([&] { return probe.inspect("g/leader").waiters == 1; }, 30s));
  kill(candidate.pid(), SIGTERM);
  const Outcome o = candidate.finish(30s);
  EXPECT_EQ(o.status, 128 + SIGTERM) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_TRUE(contains(o.err, "campaign for g/leader: interrupted by SIGTERM")) << o.err;
  EXPECT_TRUE(
      warden::testing::eventually([&] { return probe.inspect("g/leader").waiters == 0; }, 30s));

  let_go(dir);
  EXPECT_EQ(leader.finish(30s).status, 0);
}

TEST(WardenElect, PassesSigtermOnToCmdAndResignsAfterIt) {
  warden::testing::Wardend server;
  TempDir dir;
  const std::string ready = (dir.path() / "ready").string();
  Process p(elect_args(server.uri(), {},
                       {"sh", "-c",
                        "trap 'echo got TERM; exit 42' TERM; touch " + ready +
                            "; while :; do sleep 0.05; done"}),
            clean_environment());
  ASSERT_TRUE(becomes_ready(dir));
  kill(p.pid(), SIGTERM);
  const Outcome o = p.finish(30s);
  EXPECT_EQ(o.status, 42) << o.err;
  EXPECT_EQ(o.out, "got TERM\n");
  const warden::testing::WardendProbe probe(server.port());
  EXPECT_TRUE(probe.inspect("g/leader").holder_tokens.empty()) << "not resigned";
}

// With the server gone, renewals fail and the leadership is lost within --ttl: another
// candidate may lead elsewhere, so CMD is stopped and warden says so (70), as `run` does.
TEST(WardenElect, LosingTheLeadershipStopsCmdAndExits70) {
  warden::testing::Wardend server;
  TempDir dir;
  const std::string ready = (dir.path() / "ready").string();
  Process p(elect_args(server.uri(), {"--ttl", "1s", "--on-lost", "kill"},
                       {"sh", "-c", "touch " + ready + "; sleep 60"}),
            clean_environment());
  ASSERT_TRUE(becomes_ready(dir));
  server.process().kill9();
  const Outcome o = p.finish(45s);
  EXPECT_FALSE(o.timed_out) << "CMD ran to its end: the loss did not stop it";
  EXPECT_EQ(o.status, 70) << o.err;
  EXPECT_TRUE(contains(o.err, "warden: lease on g/leader (token ")) << o.err;
  EXPECT_TRUE(contains(o.err, "lost: another candidate may lead now; sending SIGKILL to CMD"))
      << o.err;
}

TEST(WardenElect, ExitsWithCmdsStatusAndGivesItTheTermOnMem) {
  const Outcome o = run(elect_args("mem://x", {"-v", "--value", "me"},
                                   {"sh", "-c", "echo $WARDEN_TOKEN $WARDEN_SEQUENCER; exit 3"}),
                        clean_environment());
  EXPECT_EQ(o.status, 3) << o.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(o.out, m, std::regex("([0-9]+) g/leader:exclusive:([0-9]+)\n")))
      << o.out;
  EXPECT_EQ(m[1], m[2]);
  EXPECT_TRUE(contains(o.err, "warden: leading g/leader, term " + m[1].str() + ", value me,"))
      << o.err;
}

// Bad input is refused before any I/O (the URL below has no server), with one line on
// stderr and status 64; CMD never runs.
TEST(WardenElect, BadInputIsAUsageErrorBeforeAnyIo) {
  const std::string nowhere = "warden://127.0.0.1:1";
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"--group", "g"}, "--name is required"},
      {{"--name", "n"}, "--group is required"},
      {{"--group", "g", "--name", "n", "--value", std::string(4097, 'v')},
       "--value: invalid_argument: a leader's value is at most 4096 bytes"},
      {{"--group", "a/b", "--name", "n"}, "election a/b/n: invalid_argument: "},
      {{"--group", "g", "--name", ""}, "invalid_argument: "},
      {{"--group", "g", "--name", "n", "--ttl", "5ms"}, "election g/n: invalid_argument: "},
      {{"--group", "g", "--name", "n", "--wait", "soon"}, "--wait: invalid duration"},
      {{"--group", "g", "--name", "n", "--on-lost", "stop"}, "--on-lost: unknown action"},
  };
  for (const auto& [args, expected] : cases) {
    Args argv = {kWarden, "elect", "--url", nowhere};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--", "echo", "ran"});
    const Outcome o = run(argv, clean_environment());
    EXPECT_EQ(o.status, 64) << expected << ": " << o.err;
    EXPECT_EQ(o.out, "") << expected;
    EXPECT_TRUE(contains(o.err, expected)) << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "not one line: " << o.err;
  }
  const Outcome no_url =
      run({kWarden, "elect", "--group", "g", "--name", "n", "--", "true"}, clean_environment());
  EXPECT_EQ(no_url.status, 64);
  EXPECT_EQ(no_url.err, "warden: --url: not given, and WARDEN_URL is not set\n");
}

// redlock:// has no elections: a usage error naming the engine's refusal, as `warden run
// --permits` is on an engine without semaphores.
TEST(WardenElect, AnEngineWithoutElectionsIsAUsageError) {
  warden::testing::RedisMasters masters(3);
  const Outcome o = run(elect_args(masters.uri(), {}, {"echo", "ran"}), clean_environment());
  EXPECT_EQ(o.status, 64) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_TRUE(contains(o.err, "warden: election g/leader: unsupported: ")) << o.err;
}

TEST(WardenElect, HelpDocumentsTheVariablesTheDefaultValueAndExitCodes) {
  const Outcome help = run({kWarden, "elect", "--help"}, clean_environment());
  EXPECT_EQ(help.status, 0);
  for (const char* part :
       {"--url", "--group", "--name", "--value", "--wait", "--ttl", "--on-lost", "--kill-after",
        "HOST:PID", "WARDEN_TOKEN", "WARDEN_SEQUENCER", "75      not the leader within --wait"}) {
    EXPECT_TRUE(contains(help.out, part)) << part << " missing from:\n" << help.out;
  }
  const Outcome top = run({kWarden, "--help"}, clean_environment());
  EXPECT_TRUE(contains(top.out, "elect")) << top.out;
  EXPECT_TRUE(contains(top.out, "leader")) << top.out;
}

}  // namespace
}  // namespace warden::cli::testing
