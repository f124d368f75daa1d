// End-to-end: a `warden run` holder on warden:// keeps its lock while a stranger
// connection tries to renew and release it with every nearby token and guessed owner
// secrets (docs/protocol.md, "Owner secrets").
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <stdexcept>
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

// Sends every command pipelined on one connection; returns the integer replies.
std::vector<long long> pipelined(std::uint16_t port,
                                 const std::vector<std::vector<std::string>>& commands) {
  std::unique_ptr<redisContext, decltype(&redisFree)> c(
      redisConnectWithTimeout("127.0.0.1", port, timeval{10, 0}), &redisFree);
  if (!c || c->err != 0) throw std::runtime_error("cannot connect to wardend");
  for (const auto& args : commands) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.c_str());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(c.get(), static_cast<int>(args.size()), argv.data(), lens.data());
  }
  std::vector<long long> out;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c.get(), &raw) != REDIS_OK) throw std::runtime_error("no reply");
    const auto* r = static_cast<redisReply*>(raw);
    out.push_back(r->type == REDIS_REPLY_INTEGER ? r->integer : -1);
    freeReplyObject(raw);
  }
  return out;
}

TEST(WardenRunOnWardend, StrangerCannotRenewOrReleaseTheHoldersLock) {
  warden::testing::Wardend server;
  const warden::testing::WardendProbe probe(server.port());
  // A short ttl, so the holder's watchdog renews many times while the stranger tries.
  // The holder's CMD runs until the test says so (a file appears): a fixed sleep could
  // end before a loaded machine got through the checks below.
  const warden::testing::TempDir dir("stranger");
  const std::string done = (dir.path() / "done").string();
  Process holder({kWarden, "run", "--url", server.uri(), "--group", "g", "--name", "n", "--ttl",
                  "500ms", "--", "sh", "-c", "while [ ! -e '" + done + "' ]; do sleep 0.05; done"},
                 environment({"WARDEN_URL"}));
  std::uint64_t token = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (token == 0 && std::chrono::steady_clock::now() < deadline) {
    const auto tokens = probe.inspect("g/n").holder_tokens;
    if (!tokens.empty()) token = tokens.front();
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_NE(token, 0u) << "warden run never took the lock";

  // Every token within 1000 of the holder's, with secrets a stranger could guess.
  std::vector<std::vector<std::string>> attempts;
  for (std::uint64_t t = token > 1000 ? token - 1000 : 1; t <= token + 1000; ++t) {
    for (const std::string& secret : {std::string(32, '0'), std::string(32, 'f')}) {
      attempts.push_back({"RENEW", "g/n", std::to_string(t), secret, "10"});
      attempts.push_back({"RELEASE", "g/n", std::to_string(t), secret});
    }
  }
  const auto replies = pipelined(server.port(), attempts);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    ASSERT_EQ(replies[i], 0) << attempts[i][0] << " " << attempts[i][2];
  }
  // The holder still holds, and another client cannot take the lock.
  EXPECT_EQ(probe.inspect("g/n").holder_tokens, std::vector<std::uint64_t>{token});
  const Outcome other = run({kWarden, "run", "--url", server.uri(), "--group", "g", "--name", "n",
                             "--wait", "0", "--", "true"},
                            environment({"WARDEN_URL"}));
  EXPECT_NE(other.status, 0) << "another client got the lock while it was held";
  std::ofstream(done).put('\n');  // the holder's CMD ends

  // The holder's CMD ran to its end under its lease, never lost: warden run exits 0.
  const Outcome o = holder.finish(30s);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.err, "");
  EXPECT_TRUE(probe.inspect("g/n").holder_tokens.empty());
}

}  // namespace
}  // namespace warden::cli::testing
