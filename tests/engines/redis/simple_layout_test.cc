// redis://…?layout=simple: the classic one-key lock (SET KEY VALUE NX PX, compare-and-
// delete) on the key GROUP:NAME, shared with redis-py's Lock, run here as real Python
// processes (Debian's python3-redis). warden and redis-py exclude each other both ways,
// and warden still hands out rising fencing tokens and notices a lost key.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/server_process.h"
#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

constexpr auto kBound = 30s;  // far above any wait here: tells a hang from an answer

std::string simple_uri(const RedisServer& server, const std::string& more = "") {
  return uri_with(server, "layout=simple" + (more.empty() ? "" : "&" + more));
}

std::vector<std::string> lines_of(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void append(const std::filesystem::path& log, const std::string& line) {
  std::ofstream(log, std::ios::app) << line << '\n' << std::flush;
}

bool log_has(const std::filesystem::path& log, const std::string& line) {
  return eventually(
      [&] {
        for (const auto& l : lines_of(log)) {
          if (l == line) return true;
        }
        return false;
      },
      kBound);
}

// redis-py's Lock on `key` in a process of its own (redis_py_lock.py says how).
ServerProcess redis_py(const RedisServer& server, const std::string& key, const std::string& id,
                       const std::filesystem::path& log, std::vector<std::string> mode) {
  std::vector<std::string> argv{
      "/usr/bin/python3", WARDEN_REDIS_PY_LOCK_PATH, std::to_string(server.port()), key, id,
      log.string()};
  argv.insert(argv.end(), mode.begin(), mode.end());
  ServerProcess process(std::move(argv), log.string() + "." + id + ".out");
  process.start();
  return process;
}

// The exit status of `process`, once it ended by itself (-1 if it still runs after kBound).
int finished(ServerProcess& process) {
  return process.wait_exit(std::chrono::duration_cast<std::chrono::milliseconds>(kBound));
}

TEST(RedisSimpleLayout, TheLockIsTheKeyGroupColonNameWithTheTokenBesideIt) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(simple_uri(server));
  Lease lease = client.lock("orders", "42").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const std::string value = probe.command({"GET", "orders:42"});
  EXPECT_TRUE(value.ends_with(":" + std::to_string(lease.token()))) << value;
  EXPECT_GT(std::stoll(probe.command({"PTTL", "orders:42"})), 0) << "no expiry on the key";
  EXPECT_EQ(probe.command({"GET", "orders:42:warden-token"}), std::to_string(lease.token()));
  EXPECT_TRUE(probe.warden_keys().empty()) << "warden's own layout was written too";
  lease.release();
  EXPECT_EQ(probe.command({"EXISTS", "orders:42"}), "0") << "the release left the key";
}

TEST(RedisSimpleLayout, LockKeyNamesTheKeyFromTheGroupAndName) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(simple_uri(server, "lock_key=locks/{name}.{group}"));
  Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_EQ(probe.command({"EXISTS", "locks/n.g"}), "1");
  const auto listed = client.list("g");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "n");
}

// Lock "n:warden-token" would be lock n's fence counter under GROUP:NAME: refused, and
// lock n's token is untouched.
TEST(RedisSimpleLayout, ANameWhoseKeyIsTheLayoutsOwnKeyBesideALockIsRefused) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(simple_uri(server));
  Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const std::string counter = probe.command({"GET", "g:n:warden-token"});
  for (const std::string name :
       {"n:warden-token", "n:warden-withdrawn:x", "warden-token:n:warden-token"}) {
    try {
      (void)client.lock("g", name).acquire(Mode::exclusive, Wait::none());
      ADD_FAILURE() << name << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << name << ": " << e.what();
    }
  }
  EXPECT_EQ(probe.command({"GET", "g:n:warden-token"}), counter) << "lock n's counter changed";
  EXPECT_TRUE(client.check(lease.sequencer()));
  lease.release();
  // A name that only contains the word is an ordinary lock.
  EXPECT_TRUE(client.lock("g", "warden-token:n").acquire(Mode::exclusive, Wait::none()));
}

TEST(RedisSimpleLayout, ExclusiveAndNonFairOnly) {
  RedisServer server;
  Client client = Client::open(simple_uri(server));
  const Capabilities caps = client.capabilities();
  EXPECT_FALSE(caps.shared);
  EXPECT_FALSE(caps.fair);
  EXPECT_TRUE(caps.non_fair);
  EXPECT_TRUE(caps.fencing);
  try {
    Lease granted = client.lock("g", "n").acquire(Mode::shared, Wait::none());
    ADD_FAILURE() << "a shared request was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
  }
  LockOptions fifo;
  fifo.fairness = Fairness::fifo;
  try {
    Lease granted = client.lock("g", "n", fifo).acquire(Mode::exclusive, Wait::none());
    ADD_FAILURE() << "a FIFO request was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
  }
}

TEST(RedisSimpleLayout, BadLayoutParametersAreRefusedBeforeAnyIo) {
  RedisServer server;
  RedisProbe probe(server);
  std::string message;
  EXPECT_EQ(open_error(uri_with(server, "layout=classic"), &message), Errc::invalid_argument);
  EXPECT_NE(message.find("layout='classic'"), std::string::npos) << message;
  EXPECT_EQ(open_error(uri_with(server, "lock_key={name}"), &message), Errc::invalid_argument);
  EXPECT_NE(message.find("lock_key needs layout=simple"), std::string::npos) << message;
  for (const char* bad : {"lock_key=fixed", "lock_key={name}{name}", "lock_key={nam}{name}",
                          "lock_key={group}{group}{name}", "lock_key="}) {
    EXPECT_EQ(open_error(simple_uri(server, bad), &message), Errc::invalid_argument) << bad;
    EXPECT_NE(message.find("lock_key"), std::string::npos) << message;
  }
  for (const char* queue_only :
       {"wait_lines=2", "waiter_ttl_ms=1000", "min_replicas=1", "replica_timeout_ms=10"}) {
    EXPECT_EQ(open_error(simple_uri(server, queue_only), &message), Errc::invalid_argument)
        << queue_only;
    EXPECT_NE(message.find("layout=simple does not have"), std::string::npos) << message;
  }
  EXPECT_EQ(open_error("redis+sentinel://127.0.0.1:1/m?layout=simple", &message),
            Errc::unsupported);
  EXPECT_EQ(open_error("redis+cluster://127.0.0.1:1?layout=simple", &message), Errc::unsupported);
  EXPECT_TRUE(probe.keys().empty()) << "a refused URI wrote to the server";
}

// A redis-py holder keeps warden out until it releases; a warden holder keeps redis-py
// out until it releases.
TEST(RedisSimpleLayout, RedisPyAndWardenHoldersBlockEachOther) {
  RedisServer server;
  TempDir dir;
  const auto log = dir.path() / "holds";
  Client client = Client::open(simple_uri(server));
  Lock lock = client.lock("g", "n");

  ServerProcess holder = redis_py(server, "g:n", "py", log, {"hold", "1500"});
  ASSERT_TRUE(log_has(log, "held py"));
  EXPECT_FALSE(lock.acquire(Mode::exclusive, Wait::none())) << "granted over redis-py's lock";
  Lease lease = lock.acquire(Mode::exclusive, Wait::up_to(kBound));
  ASSERT_TRUE(lease);
  append(log, "got warden");
  EXPECT_EQ(finished(holder), 0);
  const auto order = lines_of(log);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[1], "released py") << "warden was granted before redis-py released";

  ServerProcess refused = redis_py(server, "g:n", "py2", log, {"try"});
  EXPECT_EQ(finished(refused), 0);
  EXPECT_TRUE(log_has(log, "refused py2")) << "redis-py took a key warden holds";
  lease.release();
  ServerProcess after = redis_py(server, "g:n", "py3", log, {"try"});
  EXPECT_EQ(finished(after), 0);
  EXPECT_TRUE(log_has(log, "got py3")) << "redis-py could not take the key warden released";
}

// Two redis-py processes and two warden clients take one lock 50 times in all: the
// holds, logged around each one, never overlap, and warden's tokens rise.
TEST(RedisSimpleLayout, RedisPyAndWardenNeverOverlapOverFiftyHolds) {
  RedisServer server;
  TempDir dir;
  const auto log = dir.path() / "holds";
  ServerProcess py_a = redis_py(server, "g:n", "py-a", log, {"cycles", "13", "5"});
  ServerProcess py_b = redis_py(server, "g:n", "py-b", log, {"cycles", "12", "5"});
  std::atomic<int> failures{0};
  std::vector<std::uint64_t> tokens[2];
  std::vector<std::thread> wardens;
  for (int w = 0; w < 2; ++w) {
    wardens.emplace_back([&, w] {
      Client client = Client::open(simple_uri(server));
      Lock lock = client.lock("g", "n");
      const std::string id = "warden-" + std::to_string(w);
      for (int i = 0; i < (w == 0 ? 13 : 12); ++i) {
        Lease lease = lock.acquire(Mode::exclusive, Wait::up_to(kBound));
        if (!lease) {
          ++failures;
          return;
        }
        tokens[w].push_back(lease.token());
        append(log, "start " + id);
        std::this_thread::sleep_for(5ms);
        append(log, "end " + id);
        lease.release();
      }
    });
  }
  for (auto& t : wardens) t.join();
  EXPECT_EQ(finished(py_a), 0) << py_a.log_text();
  EXPECT_EQ(finished(py_b), 0) << py_b.log_text();
  EXPECT_EQ(failures.load(), 0) << "a warden wait ran out";

  const auto lines = lines_of(log);
  ASSERT_EQ(lines.size(), 100u);
  int warden_holds = 0;
  int python_holds = 0;
  for (std::size_t i = 0; i + 1 < lines.size(); i += 2) {
    ASSERT_TRUE(lines[i].starts_with("start ")) << "line " << i << ": " << lines[i];
    ASSERT_EQ(lines[i + 1], "end " + lines[i].substr(6))
        << "line " << i + 1 << ": two holders at once";
    (lines[i].find("warden") != std::string::npos ? warden_holds : python_holds) += 1;
  }
  EXPECT_EQ(warden_holds, 25);
  EXPECT_EQ(python_holds, 25);
  for (const auto& mine : tokens) {
    for (std::size_t i = 1; i < mine.size(); ++i) EXPECT_GT(mine[i], mine[i - 1]);
  }
}

TEST(RedisSimpleLayout, StatusShowsAnotherClientsLockWithTokenZero) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(simple_uri(server));
  ASSERT_EQ(probe.command({"SET", "g:theirs", "f0a1b2", "NX", "PX", "30000"}), "OK");
  const LockStatus status = client.inspect("g", "theirs");
  ASSERT_EQ(status.holders.size(), 1u);
  EXPECT_EQ(status.holders[0].token, 0u);
  Lease mine = client.lock("g", "mine").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(mine);
  const auto listed = client.list("g");
  ASSERT_EQ(listed.size(), 2u) << "the counter beside a lock key is not a lock";
  EXPECT_EQ(listed[0].name, "mine");
  EXPECT_EQ(listed[1].name, "theirs");
}

// The counter is only a floor-raiser: with it gone (it expires a TTL after the lock's
// last use), the server's clock still puts the next token above every earlier one.
TEST(RedisSimpleLayout, TokensRiseEvenWhenTheCounterIsGone) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(simple_uri(server));
  Lease first = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(first);
  const std::uint64_t token = first.token();
  first.release();
  probe.command({"DEL", "g:n:warden-token"});
  Lease second = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(second);
  EXPECT_GT(second.token(), token);
}

// A key taken over behind warden's back (deleted, then set by another client) is a lost
// lease at the next renewal, and warden's release leaves the other's key alone.
TEST(RedisSimpleLayout, AKeyTakenOverByAnotherClientIsALostLease) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(simple_uri(server));
  Lease lease = client.lock("g", "n", ttl(900ms)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  probe.command({"DEL", "g:n"});
  ASSERT_EQ(probe.command({"SET", "g:n", "someone-else", "PX", "30000"}), "OK");
  EXPECT_TRUE(eventually([&] { return lease.lost(); }, kBound)) << "the lease was never lost";
  try {
    lease.release();
  } catch (const Error&) {
    // A lost lease's release may say so; either way the other's key must stay.
  }
  EXPECT_EQ(probe.command({"GET", "g:n"}), "someone-else");
}

}  // namespace
}  // namespace warden::testing
