// End-to-end: a `warden run` holder on warden:// keeps its lock across a planned restart
// of wardend (SIGTERM): its watchdog's renewals fail while the server is down, then
// succeed on the restored grant, and CMD runs to its end under a lease never lost.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "process.h"
#include "support/server_process.h"
#include "support/wardend_probe.h"

namespace warden::cli::testing {
namespace {

using namespace std::chrono_literals;
const std::string kWarden = WARDEN_CLI_PATH;

// The token of the lock's holder once there is one (0 after `timeout`).
std::uint64_t holder_token(const warden::testing::WardendProbe& probe, const std::string& key,
                           std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto tokens = probe.inspect(key).holder_tokens;
    if (!tokens.empty()) return tokens.front();
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

TEST(WardenRunOnWardend, HolderKeepsItsLockAcrossACleanServerRestart) {
  warden::testing::Wardend server;
  const warden::testing::WardendProbe probe(server.port());
  // ttl 4 s: renewed every ~1.3 s, so the restart falls between renewals and must be
  // over (the grant restored) before the lease runs out on the client's clock.
  Process holder({kWarden, "run", "--url", server.uri(), "--group", "g", "--name", "n", "--ttl",
                  "4s", "--", "sleep", "6"},
                 environment({"WARDEN_URL"}));
  const std::uint64_t token = holder_token(probe, "g/n");
  ASSERT_NE(token, 0u) << "warden run never took the lock";

  ASSERT_EQ(server.process().stop(SIGTERM, 10s), 0) << server.process().log_text();
  server.start();

  // The restored grant is the holder's: nobody else gets the lock ...
  EXPECT_EQ(probe.inspect("g/n").holder_tokens, std::vector<std::uint64_t>{token});
  const Outcome other = run({kWarden, "run", "--url", server.uri(), "--group", "g", "--name", "n",
                             "--wait", "0", "--", "true"},
                            environment({"WARDEN_URL"}));
  EXPECT_NE(other.status, 0) << "another client got the lock while it was held";
  // ... while a different lock is granted at once (no restart embargo).
  const Outcome free = run({kWarden, "run", "--url", server.uri(), "--group", "g", "--name",
                            "other", "--wait", "0", "--", "true"},
                           environment({"WARDEN_URL"}));
  EXPECT_EQ(free.status, 0) << free.err;

  // CMD ran to its end and the lease was never lost: exit 0, nothing reported.
  const Outcome o = holder.finish(30s);
  EXPECT_EQ(o.status, 0) << o.err << "\nwardend log:\n" << server.process().log_text();
  EXPECT_EQ(o.err, "");
  EXPECT_TRUE(probe.inspect("g/n").holder_tokens.empty());
}

}  // namespace
}  // namespace warden::cli::testing
