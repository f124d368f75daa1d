// tests/server/restart_test.cc — planned restarts of a live wardend: after SIGTERM the
// holders are restored (their RENEW and RELEASE work from a new connection, nobody else
// gets their locks) and free locks are granted at once; after kill -9, or when the
// snapshot is damaged, the restart embargo applies as before.
#include <gtest/gtest.h>
#include <hiredis.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/server_process.h"
#include "support/text_client.h"

namespace warden::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// One hiredis connection; each call returns the reply as text: ":1", "(nil)", "-ERR ...",
// "$text", "[a, b]".

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Makes the durable longest hold 20 s, so that a restart under the crash rule refuses
// grants for 20 s: far longer than any of these tests waits.
void make_max_hold_long(TextClient& c) {
  const Grant g = grant_of(c({"ACQUIRE", "setup/long", "x", "20000"}));
  ASSERT_NE(g.token, 0u);
  ASSERT_EQ(release(c, "setup/long", g), ":1");
}

void restart_cleanly(Wardend& server) {
  ASSERT_EQ(server.process().stop(SIGTERM, 10s), 0) << server.process().log_text();
  server.start();
}

TEST(WardendRestartTest, SigtermRestartKeepsHoldersAndGrantsFreeLocksAtOnce) {
  Wardend server;
  Grant held;
  Grant shared1;
  Grant shared2;
  {
    TextClient c(server.port());
    make_max_hold_long(c);
    held = grant_of(c({"ACQUIRE", "t/held", "x", "10000"}));
    shared1 = grant_of(c({"ACQUIRE", "t/shared", "s", "10000"}));
    shared2 = grant_of(c({"ACQUIRE", "t/shared", "s", "10000"}));
    ASSERT_NE(held.token, 0u);
    ASSERT_NE(shared2.token, 0u);
    ASSERT_EQ(renew(c, "t/held", held, "12000"), ":1");
    // The holders' connection stays open across the shutdown: it is closed by it.
    ASSERT_EQ(server.process().stop(SIGTERM, 10s), 0) << server.process().log_text();
  }
  EXPECT_TRUE(contains(server.process().log_text(), "saved 3 grant(s) and 0 lock-delay(s)"))
      << server.process().log_text();
  server.start();
  EXPECT_TRUE(contains(server.process().log_text(), "clean restart: restored 3 grant(s)"))
      << server.process().log_text();

  TextClient other(server.port());
  // A free lock is granted on the first try, where the crash rule would answer
  // -STARTING for 20 s; its token is above every token from before.
  const Grant free = grant_of(other({"ACQUIRE", "t/free", "x", "5000"}));
  ASSERT_NE(free.token, 0u) << "a free lock was not granted at once after a clean restart";
  EXPECT_GT(free.token, shared2.token);
  // The held locks stay their holders': a third client cannot take them.
  EXPECT_EQ(other({"ACQUIRE", "t/held", "x", "5000"}), "(nil)");
  EXPECT_EQ(other({"ACQUIRE", "t/shared", "x", "5000"}), "(nil)");
  EXPECT_EQ(other({"CHECK", "t/held", "x", std::to_string(held.token)}), ":1");
  // Nor renew or release them without the owner secret.
  EXPECT_EQ(renew(other, "t/held", Grant{held.token, std::string(32, '0')}, "5000"), ":0");
  EXPECT_EQ(release(other, "t/held", Grant{held.token, std::string(32, 'f')}), ":0");

  // The holders, reconnected, renew and release with token and secret as before.
  TextClient holder(server.port());
  EXPECT_EQ(renew(holder, "t/held", held, "10000"), ":1");
  EXPECT_EQ(renew(holder, "t/shared", shared1, "10000"), ":1");
  EXPECT_EQ(release(holder, "t/shared", shared1), ":1");
  EXPECT_EQ(release(holder, "t/shared", shared2), ":1");
  EXPECT_EQ(release(holder, "t/held", held), ":1");
  EXPECT_EQ(release(holder, "t/held", held), ":0");  // idempotent: not held any more
  const Grant after = grant_of(other({"ACQUIRE", "t/held", "x", "5000"}));
  EXPECT_GT(after.token, free.token);
}

TEST(WardendRestartTest, RunningLockDelayIsRestoredAndWaitersAreDropped) {
  Wardend server;
  {
    TextClient c(server.port());
    make_max_hold_long(c);
    // A lease that expires (never renewed) starts a 15 s lock-delay.
    ASSERT_NE(grant_of(c({"ACQUIRE", "t/crashed", "x", "10", "DELAY", "15000"})).token, 0u);
    std::this_thread::sleep_for(50ms);
    ASSERT_EQ(c({"ACQUIRE", "t/crashed", "x", "1000"}), "(nil)");
    ASSERT_NE(grant_of(c({"ACQUIRE", "t/queue", "x", "10000"})).token, 0u);
  }
  // A waiter parked at the shutdown: its connection closes, it is not carried over.
  TextClient waiter(server.port());
  waiter.send({"ACQUIRE", "t/queue", "x", "10000", "FOREVER"});
  {
    TextClient c(server.port());
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!contains(c({"INFO"}), "waiters:1") && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(contains(c({"INFO"}), "waiters:1"));
  }
  restart_cleanly(server);
  EXPECT_TRUE(waiter.closed_by_server());
  EXPECT_TRUE(contains(server.process().log_text(), "saved 1 grant(s) and 1 lock-delay(s)"))
      << server.process().log_text();
  TextClient c(server.port());
  // The lock-delay goes on after the restart: nobody gets the lock yet.
  EXPECT_EQ(c({"ACQUIRE", "t/crashed", "x", "1000"}), "(nil)");
  const std::string delayed = c({"INSPECT", "t/crashed"});
  EXPECT_TRUE(contains(delayed, "$delayed_ms, :")) << delayed;
  EXPECT_FALSE(contains(delayed, "$delayed_ms, :0]")) << delayed;
  // The holder is there, the waiter is not.
  const std::string queue = c({"INSPECT", "t/queue"});
  EXPECT_TRUE(contains(queue, "$waiters, []")) << queue;
  EXPECT_FALSE(contains(queue, "$holders, []")) << queue;
}

// The grants of a semaphore and of a multi-lock are ordinary grants: a clean restart
// keeps them, the semaphore's number of permits with them.
TEST(WardendRestartTest, SigtermRestartKeepsSemaphoreAndMultiLockGrants) {
  Wardend server;
  Grant permits;
  Grant a;
  Grant b;
  {
    TextClient c(server.port());
    make_max_hold_long(c);
    permits = grant_of(c({"ACQUIRE", "t/sem", "s", "10000", "PERMITS", "2", "3"}));
    ASSERT_NE(permits.token, 0u);
    const std::string set = c({"ACQUIRESET", "10000", "2", "t/a", "x", "t/b", "x"});
    const auto second = set.find("[:", 2);
    ASSERT_TRUE(set.starts_with("[[:") && second != std::string::npos) << set;
    a = grant_of(set.substr(1));
    b = grant_of(set.substr(second));
    ASSERT_NE(a.token, 0u);
    ASSERT_NE(b.token, 0u);
    ASSERT_EQ(server.process().stop(SIGTERM, 10s), 0) << server.process().log_text();
  }
  server.start();
  EXPECT_TRUE(contains(server.process().log_text(), "clean restart: restored 3 grant(s)"))
      << server.process().log_text();

  TextClient other(server.port());
  const Grant third = grant_of(other({"ACQUIRE", "t/sem", "s", "5000", "PERMITS", "1", "3"}));
  EXPECT_NE(third.token, 0u) << "one permit of three was free";
  EXPECT_EQ(other({"ACQUIRE", "t/sem", "s", "5000", "PERMITS", "1", "3"}), "(nil)")
      << "the two permits held before the restart are held after it";
  EXPECT_TRUE(other({"ACQUIRE", "t/sem", "s", "5000", "PERMITS", "1", "4"}).starts_with("-INVALID"))
      << "the semaphore kept its number of permits";
  EXPECT_EQ(other({"ACQUIRESET", "5000", "2", "t/a", "x", "t/c", "x"}), "(nil)");

  TextClient holder(server.port());
  EXPECT_EQ(release(holder, "t/sem", permits), ":1");
  EXPECT_EQ(release(holder, "t/a", a), ":1");
  EXPECT_EQ(release(holder, "t/b", b), ":1");
  EXPECT_EQ(release(other, "t/sem", third), ":1");
  EXPECT_NE(grant_of(other({"ACQUIRESET", "5000", "2", "t/a", "x", "t/b", "x"}).substr(1)).token,
            0u);
}

TEST(WardendRestartTest, TwoCleanRestartsInARowKeepTheHolder) {
  Wardend server;
  Grant held;
  {
    TextClient c(server.port());
    make_max_hold_long(c);
    held = grant_of(c({"ACQUIRE", "t/held", "x", "10000"}));
    ASSERT_NE(held.token, 0u);
  }
  for (int restart = 0; restart < 2; ++restart) {
    restart_cleanly(server);
    TextClient c(server.port());
    EXPECT_EQ(renew(c, "t/held", held, "10000"), ":1") << "after restart " << restart;
    EXPECT_EQ(c({"ACQUIRE", "t/held", "x", "5000"}), "(nil)") << "after restart " << restart;
    EXPECT_NE(grant_of(c({"ACQUIRE", "t/free" + std::to_string(restart), "x", "5000"})).token, 0u)
        << "after restart " << restart;
  }
  TextClient c(server.port());
  EXPECT_EQ(release(c, "t/held", held), ":1");
}

TEST(WardendRestartTest, KillNineKeepsTheEmbargoEvenAfterACleanRestart) {
  Wardend server;
  Grant held;
  {
    TextClient c(server.port());
    make_max_hold_long(c);
    held = grant_of(c({"ACQUIRE", "t/held", "x", "10000"}));
  }
  // A clean restart first: its snapshot is consumed, so the crash that follows cannot
  // bring it back.
  restart_cleanly(server);
  server.process().kill9();
  server.start();
  TextClient c(server.port());
  const std::string refused = c({"ACQUIRE", "t/free", "x", "5000"});
  EXPECT_TRUE(contains(refused, "-STARTING restarted recently")) << refused;
  EXPECT_EQ(renew(c, "t/held", held, "10000"), ":0");  // holders are not restored
  EXPECT_FALSE(fs::exists(server.data_dir() / "table"));
}

TEST(WardendRestartTest, DamagedSnapshotFallsBackToTheEmbargoAndSaysWhy) {
  Wardend server;
  Grant held;
  {
    TextClient c(server.port());
    make_max_hold_long(c);
    held = grant_of(c({"ACQUIRE", "t/held", "x", "10000"}));
  }
  ASSERT_EQ(server.process().stop(SIGTERM, 10s), 0);
  const fs::path table = server.data_dir() / "table";
  std::string bytes;
  {
    std::ifstream in(table, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 50u);
  bytes[45] = static_cast<char>(bytes[45] ^ 0x20);
  std::ofstream(table, std::ios::binary | std::ios::trunc) << bytes;

  server.start();
  const std::string log = server.process().log_text();
  EXPECT_TRUE(contains(log, table.string())) << log;
  EXPECT_TRUE(contains(log, "damaged")) << log;
  EXPECT_TRUE(contains(log, "not a clean restart")) << log;
  TextClient c(server.port());
  EXPECT_TRUE(contains(c({"ACQUIRE", "t/free", "x", "5000"}), "-STARTING"));
  EXPECT_EQ(renew(c, "t/held", held, "10000"), ":0");
  EXPECT_TRUE(fs::exists(server.data_dir() / "table.damaged"));
  EXPECT_FALSE(fs::exists(table));
}

}  // namespace
}  // namespace warden::testing
