// End-to-end tests of `warden run`: they start the built binary against mem://.
//
// mem:// is a lock table inside the warden process, so these tests cover everything
// but contention between processes (that needs a lock server).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "process.h"
#include "support/redis_masters.h"
#include "support/server_process.h"
#include "warden/version.h"

namespace warden::cli::testing {
namespace {

using namespace std::chrono_literals;
using Args = std::vector<std::string>;

const std::string kWarden = WARDEN_CLI_PATH;

// Runs `warden ARGS` without WARDEN_URL in its environment, plus `env`.
Outcome warden(const Args& args, const Args& env = {}, std::chrono::milliseconds timeout = 30s) {
  Args argv = {kWarden};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, environment({"WARDEN_URL", "WARDEN_TOKEN", "WARDEN_SEQUENCER"}, env), timeout);
}

// `warden run --url mem:// --group g --name n EXTRA... -- CMD...`
Outcome warden_run(const Args& extra, const Args& cmd, const Args& env = {}) {
  Args args = {"run", "--url", "mem://", "--group", "g", "--name", "n"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  args.insert(args.end(), cmd.begin(), cmd.end());
  return warden(args, env);
}

// The CMDs that a lost lease must cut short would run 30 s; ending well before that is
// the behaviour under test (not a speed), with room for a loaded sanitizer build.
constexpr auto kCmdRuns = 20s;

using warden::testing::TempDir;

TEST(WardenRun, GivesCmdTheTokenAndSequencer) {
  Outcome o = warden_run({}, {"sh", "-c", "echo $WARDEN_TOKEN $WARDEN_SEQUENCER"});
  ASSERT_EQ(o.status, 0) << o.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(o.out, m, std::regex("([0-9]+) g/n:exclusive:([0-9]+)\n"))) << o.out;
  EXPECT_EQ(m[1], m[2]);
  EXPECT_EQ(o.err, "");
}

TEST(WardenRun, SharedLockShowsInTheSequencer) {
  Outcome o = warden_run({"--shared"}, {"sh", "-c", "echo $WARDEN_SEQUENCER"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(std::regex_match(o.out, std::regex("g/n:shared:[0-9]+\n"))) << o.out;
}

TEST(WardenRun, ReplacesInheritedTokenVariables) {
  Outcome o = warden_run({}, {"sh", "-c", "echo $WARDEN_TOKEN"},
                         {"WARDEN_TOKEN=stale", "WARDEN_SEQUENCER=stale"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(std::regex_match(o.out, std::regex("[0-9]+\n"))) << o.out;
}

TEST(WardenRun, PassesArgumentsAfterCmdThroughUntouched) {
  Outcome o = warden_run({}, {"sh", "-c", "printf '%s|' \"$@\"", "sh", "--url", "-x", "--", "a b"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "--url|-x|--|a b|");
}

TEST(WardenRun, TakesCmdWithoutDoubleDashWhenItLooksLikeNoOption) {
  Outcome o =
      warden({"run", "--url", "mem://", "--group", "g", "--name", "n", "sh", "-c", "echo ok"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "ok\n");
}

TEST(WardenRun, ExitsWithCmdsExitStatus) {
  EXPECT_EQ(warden_run({}, {"true"}).status, 0);
  EXPECT_EQ(warden_run({}, {"sh", "-c", "exit 3"}).status, 3);
  EXPECT_EQ(warden_run({}, {"sh", "-c", "exit 125"}).status, 125);
}

TEST(WardenRun, ExitsWith128PlusSignalWhenCmdIsKilled) {
  Outcome term = warden_run({}, {"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(term.status, 128 + SIGTERM) << term.err;
  Outcome kill = warden_run({}, {"sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(kill.status, 128 + SIGKILL) << kill.err;
}

TEST(WardenRun, ExitsWith127WhenCmdIsNotFound) {
  Outcome o = warden_run({}, {"warden-test-no-such-command"});
  EXPECT_EQ(o.status, 127);
  EXPECT_EQ(o.err, "warden: warden-test-no-such-command: No such file or directory\n");
}

TEST(WardenRun, ExitsWith126WhenCmdIsNotExecutable) {
  TempDir dir;
  std::ofstream(dir.path() / "script") << "echo hi\n";
  chmod((dir.path() / "script").c_str(), 0644);
  Outcome o = warden_run({}, {(dir.path() / "script").string()});
  EXPECT_EQ(o.status, 126);
  EXPECT_TRUE(contains(o.err, "Permission denied")) << o.err;
}

TEST(WardenRun, TakesTheUrlFromWardenUrl) {
  Outcome o = warden({"run", "--group", "g", "--name", "n", "--", "sh", "-c", "echo ok"},
                     {"WARDEN_URL=mem://"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "ok\n");
}

TEST(WardenRun, IsAUsageErrorWithoutUrl) {
  Outcome o = warden({"run", "--group", "g", "--name", "n", "--", "echo", "ran"});
  EXPECT_EQ(o.status, 64);
  EXPECT_EQ(o.err, "warden: --url: not given, and WARDEN_URL is not set\n");
  EXPECT_EQ(o.out, "");
}

TEST(WardenRun, IsAUsageErrorForAnUnknownScheme) {
  Outcome o =
      warden({"run", "--url", "nosuch://x", "--group", "g", "--name", "n", "--", "echo", "ran"});
  EXPECT_EQ(o.status, 64) << o.err;
  EXPECT_TRUE(contains(o.err, "warden: connect: ")) << o.err;
  EXPECT_TRUE(contains(o.err, "invalid_argument: ")) << o.err;
  EXPECT_EQ(o.out, "");
}

// Bad input is refused before CMD runs, with one line on stderr and status 64.
struct BadInput {
  const char* label;
  Args extra;
  const char* expected;  // a part of the one-line message
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const BadInput& input, std::ostream* os) { *os << input.label; }

class WardenRunRejects : public ::testing::TestWithParam<BadInput> {};

TEST_P(WardenRunRejects, WithUsageStatusWithoutRunningCmd) {
  Args args = {"run", "--url", "mem://"};
  args.insert(args.end(), GetParam().extra.begin(), GetParam().extra.end());
  args.insert(args.end(), {"--", "echo", "ran"});
  Outcome o = warden(args);
  EXPECT_EQ(o.status, 64) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_TRUE(contains(o.err, GetParam().expected)) << o.err;
  EXPECT_TRUE(o.err.starts_with("warden: ")) << o.err;
  EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "not one line: " << o.err;
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, WardenRunRejects,
    ::testing::Values(
        BadInput{"GroupWithSlash", {"--group", "a/b", "--name", "n"}, "lock a/b"},
        BadInput{
            "GroupTooLong", {"--group", std::string(65, 'g'), "--name", "n"}, "invalid_argument: "},
        BadInput{"EmptyGroup", {"--group", "", "--name", "n"}, "invalid_argument: "},
        BadInput{"EmptyName", {"--group", "g", "--name", ""}, "invalid_argument: "},
        BadInput{
            "NameTooLong", {"--group", "g", "--name", std::string(513, 'n')}, "invalid_argument: "},
        BadInput{"TtlBelowMinimum",
                 {"--group", "g", "--name", "n", "--ttl", "5ms"},
                 "warden: lock g/n: invalid_argument: "},
        BadInput{"TtlAboveMaximum",
                 {"--group", "g", "--name", "n", "--ttl", "169h"},
                 "invalid_argument: "},
        BadInput{"TtlWithoutUnit",
                 {"--group", "g", "--name", "n", "--ttl", "30"},
                 "--ttl: invalid duration \"30\": missing unit"},
        BadInput{"TtlNegative",
                 {"--group", "g", "--name", "n", "--ttl", "-1s"},
                 "--ttl: invalid duration \"-1s\": negative"},
        BadInput{"TtlSubMillisecond",
                 {"--group", "g", "--name", "n", "--ttl", "10500us"},
                 "whole number of milliseconds"},
        BadInput{"LockDelayAboveMaximum",
                 {"--group", "g", "--name", "n", "--lock-delay", "2h"},
                 "invalid_argument: "},
        BadInput{"WaitGarbage",
                 {"--group", "g", "--name", "n", "--wait", "soon"},
                 "--wait: invalid duration"},
        BadInput{"KillAfterGarbage",
                 {"--group", "g", "--name", "n", "--kill-after", "5"},
                 "--kill-after: invalid duration"},
        BadInput{"UnknownOnLost",
                 {"--group", "g", "--name", "n", "--on-lost", "stop"},
                 "--on-lost: unknown action \"stop\" (one of term, kill, ignore)"},
        BadInput{"MissingGroup", {"--name", "n"}, "--group is required"},
        BadInput{"MissingName", {"--group", "g"}, "--name is required"},
        BadInput{"UnknownOption", {"--group", "g", "--name", "n", "--frobnicate"}, "usage: "}),
    [](const ::testing::TestParamInfo<BadInput>& p) { return p.param.label; });

TEST(WardenRun, IsAUsageErrorWithoutCmd) {
  Outcome o = warden({"run", "--url", "mem://", "--group", "g", "--name", "n"});
  EXPECT_EQ(o.status, 64);
  EXPECT_TRUE(contains(o.err, "CMD is required")) << o.err;
}

TEST(WardenRun, TryOnceGetsAFreeLock) {
  Outcome o = warden_run({"--wait", "0"}, {"true"});
  EXPECT_EQ(o.status, 0) << o.err;
}

TEST(WardenRun, AcceptsEveryDocumentedOption) {
  Outcome o = warden_run({"--wait", "1s", "--ttl", "2s", "--lock-delay", "100ms", "--unfair", "-v",
                          "--on-lost", "kill", "--kill-after", "1s"},
                         {"true"});
  EXPECT_EQ(o.status, 0) << o.err;
}

TEST(WardenRun, TerminatesCmdWhenTheLeaseRunsOut) {
  Outcome o = warden_run({"--no-renew", "--ttl", "300ms"}, {"sleep", "30"});
  EXPECT_EQ(o.status, 70) << o.err;
  EXPECT_GE(o.elapsed, 250ms);
  EXPECT_LT(o.elapsed, kCmdRuns) << "CMD ran to its end: the loss did not stop it";
  EXPECT_TRUE(contains(o.err, "warden: lease on g/n (token ")) << o.err;
  EXPECT_TRUE(contains(o.err, "sending SIGTERM to CMD")) << o.err;
  EXPECT_TRUE(contains(o.err, "CMD exited with status 143 after the lease")) << o.err;
}

TEST(WardenRun, KillsCmdAtOnceWithOnLostKill) {
  Outcome o = warden_run({"--no-renew", "--ttl", "300ms", "--on-lost", "kill"}, {"sleep", "30"});
  EXPECT_EQ(o.status, 70) << o.err;
  EXPECT_LT(o.elapsed, kCmdRuns) << "CMD ran to its end: the loss did not stop it";
  EXPECT_TRUE(contains(o.err, "sending SIGKILL to CMD")) << o.err;
  EXPECT_TRUE(contains(o.err, "status 137")) << o.err;
}

TEST(WardenRun, KillsCmdThatIgnoresSigtermAfterTheGracePeriod) {
  Outcome o = warden_run({"--no-renew", "--ttl", "200ms", "--kill-after", "300ms"},
                         {"sh", "-c", "trap '' TERM; sleep 30"});
  EXPECT_EQ(o.status, 70) << o.err;
  EXPECT_GE(o.elapsed, 450ms);
  EXPECT_LT(o.elapsed, kCmdRuns) << "CMD ran to its end: SIGKILL never came";
  EXPECT_TRUE(contains(o.err, "CMD still running 300ms after SIGTERM; sending SIGKILL")) << o.err;
}

TEST(WardenRun, LetsCmdFinishWithOnLostIgnoreButReportsTheLoss) {
  Outcome o = warden_run({"--no-renew", "--ttl", "200ms", "--on-lost", "ignore"},
                         {"sh", "-c", "sleep 0.6; echo done"});
  EXPECT_EQ(o.status, 70) << o.err;
  EXPECT_EQ(o.out, "done\n");
  EXPECT_TRUE(contains(o.err, "CMD keeps running (--on-lost ignore)")) << o.err;
  EXPECT_TRUE(contains(o.err, "CMD exited with status 0 after the lease")) << o.err;
}

TEST(WardenRun, KeepsTheLeaseBeyondTheTtlByRenewing) {
  Outcome o = warden_run({"--ttl", "150ms"}, {"sleep", "0.6"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.err, "");
}

// Waits until `path` exists: CMD's sign that it has started and set its traps.
bool wait_for_file(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

TEST(WardenRun, PassesSigtermOnToCmdAndExitsWithItsStatus) {
  TempDir dir;
  std::string ready = (dir.path() / "ready").string();
  Process p(
      {kWarden, "run", "--url", "mem://", "--group", "g", "--name", "n", "--", "sh", "-c",
       "trap 'echo got TERM; exit 42' TERM; touch " + ready + "; while :; do sleep 0.05; done"},
      environment({"WARDEN_URL"}));
  ASSERT_TRUE(wait_for_file(ready, 10s));
  kill(p.pid(), SIGTERM);
  Outcome o = p.finish(10s);
  EXPECT_EQ(o.status, 42) << o.err;
  EXPECT_EQ(o.out, "got TERM\n");
}

TEST(WardenRun, PassesSigintOnToCmd) {
  TempDir dir;
  std::string ready = (dir.path() / "ready").string();
  Process p({kWarden, "run", "--url", "mem://", "--group", "g", "--name", "n", "--", "sh", "-c",
             "trap 'exit 7' INT; touch " + ready + "; while :; do sleep 0.05; done"},
            environment({"WARDEN_URL"}));
  ASSERT_TRUE(wait_for_file(ready, 10s));
  kill(p.pid(), SIGINT);
  Outcome o = p.finish(10s);
  EXPECT_EQ(o.status, 7) << o.err;
}

TEST(Warden, PrintsItsVersion) {
  Outcome o = warden({"--version"});
  EXPECT_EQ(o.status, 0);
  EXPECT_EQ(o.out, "warden " WARDEN_VERSION_STRING "\n");
}

TEST(Warden, DocumentsExitCodesInHelp) {
  Outcome top = warden({"--help"});
  EXPECT_EQ(top.status, 0);
  EXPECT_TRUE(contains(top.out, "run")) << top.out;
  EXPECT_TRUE(contains(top.out, "each command lists its own")) << top.out;
  EXPECT_FALSE(contains(top.out, "CMD's exit status")) << top.out;

  Outcome run_help = warden({"run", "--help"});
  EXPECT_EQ(run_help.status, 0);
  for (const char* part : {"--url", "--group", "--name", "--shared", "--wait", "--ttl",
                           "--lock-delay", "--unfair", "--no-renew", "--on-lost", "--kill-after",
                           "WARDEN_TOKEN", "WARDEN_SEQUENCER", "WARDEN_URL", "Exit status"}) {
    EXPECT_TRUE(contains(run_help.out, part)) << part << " missing from:\n" << run_help.out;
  }
  EXPECT_TRUE(contains(run_help.out, "75      lock not acquired within --wait")) << run_help.out;
}

// Each command documents its own statuses, not `warden run`'s.
TEST(Warden, EveryCommandDocumentsItsOwnExitCodes) {
  const std::vector<std::pair<std::string, std::string>> own = {
      {"torture", "the verdict is FAIL"},
      {"server", "stopped by SIGINT or SIGTERM"},
      {"bench", "the benchmark ran"},
      {"status", "Exit status"},
  };
  for (const auto& [command, text] : own) {
    Outcome help = warden({command, "--help"});
    EXPECT_EQ(help.status, 0) << command;
    EXPECT_TRUE(contains(help.out, text)) << command << ":\n" << help.out;
    EXPECT_FALSE(contains(help.out, "CMD's exit status")) << command << ":\n" << help.out;
  }
}

TEST(Warden, ServerBadOptionIsAUsageError) {
  EXPECT_EQ(warden({"server", "--listen", "nowhere"}).status, 64);
  Outcome wardend =
      run({warden::testing::wardend_path(), "--listen", "nowhere"}, environment({}, {}), 10s);
  EXPECT_EQ(wardend.status, 64) << wardend.err;
  EXPECT_TRUE(contains(wardend.err, "--listen")) << wardend.err;
}

TEST(Warden, NamesAnUnknownSubcommand) {
  Outcome o = warden({"lokc", "--group", "g"});
  EXPECT_EQ(o.status, 64);
  EXPECT_EQ(o.err, "warden: usage: unknown subcommand \"lokc\" (see warden --help)\n");
}

TEST(Warden, IsAUsageErrorWithoutSubcommand) {
  Outcome o = warden({});
  EXPECT_EQ(o.status, 64);
  EXPECT_TRUE(o.err.starts_with("warden: usage: ")) << o.err;
}

// Without a fairness flag, `warden run` works on every engine: redlock:// has no FIFO,
// so automatic gives its own order; -v says which fairness was used.
TEST(WardenRunFairness, DefaultWorksWithoutFifoAndVerboseSaysWhatWasUsed) {
  warden::testing::RedisMasters masters(3);
  Outcome o =
      warden({"run", "--url", masters.uri(), "--group", "g", "--name", "n", "-v", "--", "true"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(contains(o.err, "fairness non-fair (automatic)")) << o.err;

  // An explicit FIFO request on an engine without FIFO is refused: usage (64), and CMD
  // never runs.
  Outcome fifo = warden({"run", "--url", masters.uri(), "--group", "g", "--name", "n", "--fairness",
                         "fifo", "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(fifo.status, 64) << fifo.err;
  EXPECT_TRUE(contains(fifo.err, "FIFO")) << fifo.err;
  EXPECT_EQ(fifo.out, "");
}

TEST(WardenRunFairness, AutomaticIsFifoWhereTheEngineHasIt) {
  Outcome o = warden_run({"-v"}, {"true"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(contains(o.err, "fairness fifo (automatic)")) << o.err;
  Outcome non_fair = warden_run({"-v", "--fairness", "non-fair"}, {"true"});
  EXPECT_EQ(non_fair.status, 0) << non_fair.err;
  EXPECT_TRUE(contains(non_fair.err, "fairness non-fair,")) << non_fair.err;
}

TEST(WardenRunFairness, BadFairnessIsAUsageError) {
  Outcome o = warden_run({"--fairness", "lifo"}, {"sh", "-c", "echo ran"});
  EXPECT_EQ(o.status, 64) << o.err;
  EXPECT_TRUE(contains(o.err, "one of automatic, fifo, non-fair")) << o.err;
  EXPECT_EQ(o.out, "");
  Outcome both = warden_run({"--fairness", "fifo", "--unfair"}, {"true"});
  EXPECT_EQ(both.status, 64) << both.err;
}

}  // namespace
}  // namespace warden::cli::testing
