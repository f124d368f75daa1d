// `warden torture` end to end, briefly, on every engine that runs across processes:
// the command starts its resource and client processes against a real backend, injects
// faults on the clients (pauses, kills, a partition), and must come back with a passing
// verdict — in particular no stale write accepted by the fence, and every paused,
// killed or cut-off holder's lock handed on within the TTL plus the engine's allowance.
// The database engines also get a server fault (their fixtures' servers can be started
// again from a script). The full matrix (every nemesis, server faults included) is
// scripts/torture-matrix.sh, labelled slow.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "support/etcd_server.h"
#include "support/mariadb_server.h"
#include "support/postgres_server.h"
#include "support/redis_masters.h"
#include "support/redis_server.h"
#include "support/server_process.h"
#include "support/zookeeper_server.h"
#include "torture/restartable_server.h"

namespace warden::testing {
namespace {

struct Outcome {
  int status = -1;
  std::string output;
};

// Runs `warden torture` on `url` for 3 s with 3 clients and a 1 s TTL, `extra` options
// appended; returns its exit status and stdout (the summary).
Outcome torture(const std::string& url, const std::string& nemesis, const std::string& epsilon,
                const std::vector<std::string>& extra = {}) {
  TempDir out("warden-torture-smoke");
  // The run's random choices (which client the nemesis hits, hold times) come from one
  // seed: WARDEN_SEED reruns a failure's; the summary names the seed used.
  const char* seed_env = std::getenv("WARDEN_SEED");
  const std::string seed = seed_env != nullptr ? seed_env : "1";
  std::fprintf(stderr, "seed %s (WARDEN_SEED)\n", seed.c_str());
  std::string command = std::string(WARDEN_CLI_PATH) + " torture --url '" + url + "' --seed " +
                        seed + " --clients 3 --duration 3s --ttl 1s --epsilon " + epsilon +
                        " --nemesis " + nemesis + " --out " + out.path().string();
  for (const auto& arg : extra) command += " '" + arg + "'";
  command += " 2>/dev/null";
  Outcome outcome;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return outcome;
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) outcome.output += buffer.data();
  const int status = ::pclose(pipe);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

void expect_pass(const Outcome& outcome) {
  EXPECT_EQ(outcome.status, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("RESULT PASS"), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("PASS  stale_accepted"), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("PASS  tokens_backwards"), std::string::npos) << outcome.output;
  // The nemesis struck (its first fault comes after 2 TTLs): a run without a fault would
  // prove nothing.
  EXPECT_EQ(outcome.output.find(", 0 faults"), std::string::npos) << outcome.output;
}

TEST(TortureSmoke, Wardend) {
  Wardend server;
  expect_pass(torture(server.uri(), "pause-holder", "500ms"));
  expect_pass(torture(server.uri(), "kill-holder", "500ms"));
}

// A semaphore of 2 permits among 3 clients: its holders write at once, unfenced, and a
// killed holder's permit is handed on. None began while 2 others were under way.
void expect_semaphore_pass(const Outcome& outcome) {
  EXPECT_EQ(outcome.status, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("RESULT PASS"), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("of 2 permits; 0 holds began beyond them"), std::string::npos)
      << outcome.output;
  EXPECT_EQ(outcome.output.find("at most 1 at once"), std::string::npos)
      << "the permits were never held together: the run proves nothing\n"
      << outcome.output;
  EXPECT_EQ(outcome.output.find(", 0 faults"), std::string::npos) << outcome.output;
}

const std::vector<std::string> kSemaphore = {"--primitive", "semaphore", "--permits", "2"};
const std::vector<std::string> kElection = {"--primitive", "election"};

TEST(TortureSmoke, WardendSemaphoreAndElection) {
  Wardend server;
  expect_semaphore_pass(torture(server.uri(), "kill-holder", "500ms", kSemaphore));
  // A leader's term is its token: a paused leader's late write is refused after its
  // successor's.
  expect_pass(torture(server.uri(), "pause-holder", "500ms", kElection));
}

TEST(TortureSmoke, Redis) {
  RedisServer server;
  expect_pass(torture(server.uri(), "pause-holder", "500ms"));
  expect_pass(torture(server.uri(), "kill-waiter", "500ms"));
  // Through the cuttable relays: a holder cut off from Redis cannot release, and its
  // lock must still be handed on once its lease runs out.
  expect_pass(torture(server.uri(), "partition-client", "500ms"));
  expect_pass(torture(server.uri(), "pause-holder", "500ms", kElection));
}

TEST(TortureSmoke, Redlock) {
  RedisMasters masters(3);
  expect_pass(torture(masters.uri(), "pause-holder", "500ms"));
  expect_pass(torture(masters.uri(), "kill-holder", "500ms"));
}

TEST(TortureSmoke, Etcd) {
  EtcdCluster cluster;
  // etcd leases are whole seconds: the 1 s TTL is a 1 s lease, checked by the leader.
  expect_pass(torture(cluster.uri(), "pause-holder", "1500ms"));
  expect_pass(torture(cluster.uri(), "kill-holder", "1500ms"));
  expect_pass(torture(cluster.uri(), "kill-holder", "1500ms", kElection));
}

TEST(TortureSmoke, ZooKeeper) {
  ZooKeeperEnsemble ensemble;
  // A paused or killed holder's node goes when its session expires: the session
  // timeout (1 s here, the least the URI takes) is the allowance.
  const std::string uri = ensemble.uri() + "?session_timeout_ms=1000";
  expect_pass(torture(uri, "kill-holder", "1500ms"));
  expect_pass(torture(uri, "pause-holder", "1500ms"));
  expect_pass(torture(uri, "pause-holder", "1500ms", kElection));
}

// The --server-pid / --server-restart options of a server started through `restartable`
// (the fixture's own process must be stopped first: see restartable_server.h).
std::vector<std::string> server_options(const RestartableServer& restartable) {
  return {"--server-pid", std::to_string(restartable.start()), "--server-restart",
          restartable.command()};
}

TEST(TortureSmoke, Postgres) {
  PostgresServer server;
  // The lease is the session: a paused holder's idle session is ended by the server at
  // its TTL (idle_session_timeout), a killed holder's as soon as its socket closes, and
  // the waiter queued in pg_advisory_lock is granted at once.
  expect_pass(torture(server.uri(), "pause-holder", "500ms"));
  expect_pass(torture(server.uri(), "kill-holder", "500ms"));
  // kill -9 of the postmaster ends every backend; after the restart nothing is held, and
  // the tokens come from a sequence, so they go on rising.
  RestartableServer restartable(server.process().argv(), server.process().log(),
                                "pg_isready -q -h 127.0.0.1 -p " + std::to_string(server.port()));
  server.kill9();
  expect_pass(torture(server.uri(), "restart-server", "500ms", server_options(restartable)));
}

TEST(TortureSmoke, MariaDb) {
  MariaDbServer server;
  // The lease is the session: wait_timeout = the TTL in whole seconds (1 s here) ends a
  // paused holder's session; a killed holder's lock is free as its socket closes.
  expect_pass(torture(server.uri(), "pause-holder", "1000ms"));
  expect_pass(torture(server.uri(), "kill-holder", "1000ms"));
  // kill -9 of mariadbd frees every GET_LOCK (they live in memory); the tokens are
  // committed InnoDB rows, so they go on rising after the restart.
  RestartableServer restartable(server.process().argv(), server.process().log(),
                                "mariadb-admin --no-defaults -h 127.0.0.1 -P " +
                                    std::to_string(server.port()) +
                                    " -u root --connect-timeout=2 ping");
  server.kill9();
  expect_pass(torture(server.uri(), "restart-server", "1000ms", server_options(restartable)));
}

}  // namespace
}  // namespace warden::testing
