// redis:// under contention from several processes: 64 threads in 4 processes take
// shared and exclusive turns on one lock and use a fenced counter in a file. Mutual
// exclusion holds exactly when every exclusive turn incremented the counter with no
// other write in between, no reader saw the counter move, and no token was stale.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fenced_counter.h"
#include "support/server_process.h"
#include "test_util.h"

namespace warden::testing {
namespace {

constexpr int kProcesses = 4;
constexpr int kThreads = 16;  // per process
constexpr int kRounds = 10;   // acquires per thread

// Exclusive turns of one process, as lock_child.cc picks them.
long exclusive_turns_per_process() {
  long n = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int r = 0; r < kRounds; ++r) n += (t + r) % 3 == 0 ? 1 : 0;
  }
  return n;
}

struct Report {
  long exclusive = 0, shared = 0, stale = 0, violations = 0, failures = 0;
};

bool parse(const std::string& log, Report& out) {
  const auto at = log.find("done ");
  return at != std::string::npos &&
         std::sscanf(log.c_str() + at,
                     "done exclusive=%ld shared=%ld stale=%ld violations=%ld "
                     "failures=%ld",
                     &out.exclusive, &out.shared, &out.stale, &out.violations, &out.failures) == 5;
}

TEST(RedisContention, SixtyFourThreadsInFourProcessesKeepMutualExclusion) {
  RedisServer server;
  RedisProbe probe(server);
  TempDir dir("redis-contention");
  const auto counter_file = dir.path() / "counter";
  const FencedCounter counter(counter_file);

  std::vector<std::unique_ptr<ServerProcess>> children;
  const auto started = Clock::now();
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(std::make_unique<ServerProcess>(
        std::vector<std::string>{lock_child_path(), "contend", server.uri(), "g", "x",
                                 std::to_string(kThreads), std::to_string(kRounds),
                                 counter_file.string()},
        dir.path() / ("child-" + std::to_string(p) + ".log")));
    children.back()->start();
  }

  Report total;
  for (auto& child : children) {
    ASSERT_TRUE(child->wait_for_log("done ", 60s)) << "a contender did not finish:\n"
                                                   << child->log_text();
    Report r;
    ASSERT_TRUE(parse(child->log_text(), r)) << child->log_text();
    total.exclusive += r.exclusive;
    total.shared += r.shared;
    total.stale += r.stale;
    total.violations += r.violations;
    total.failures += r.failures;
  }
  const auto took = Clock::now() - started;
  for (auto& child : children) {
    EXPECT_TRUE(eventually([&] { return !child->running(); }, 10s)) << "a contender hangs on exit";
    EXPECT_EQ(child->log_text().find("Sanitizer"), std::string::npos) << child->log_text();
  }

  const long want_exclusive = kProcesses * exclusive_turns_per_process();
  const long want_shared = long{kProcesses} * kThreads * kRounds - want_exclusive;
  EXPECT_EQ(total.violations, 0) << "two holders overlapped";
  EXPECT_EQ(total.stale, 0) << "a holder wrote or read with a stale token";
  EXPECT_EQ(total.failures, 0) << "acquires that failed, timed out or were lost";
  EXPECT_EQ(total.exclusive, want_exclusive);
  EXPECT_EQ(total.shared, want_shared);
  EXPECT_EQ(counter.value(), static_cast<std::uint64_t>(want_exclusive));
  RecordProperty("seconds", std::to_string(seconds(took)));
  std::printf("%ld exclusive and %ld shared turns in %.2f s\n", total.exclusive, total.shared,
              seconds(took));
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing
