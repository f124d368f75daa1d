// redis:// waiters blocking on connections of their own (engines/redis/wait_lines.h): a
// queued waiter sends BLPOP on its wake list with its next attempt behind it, and a
// release that admits it pushes to that list. Against a real redis-server, whose
// CLIENT LIST shows who is blocked in BLPOP.
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "engines/redis/test_util.h"

namespace warden::testing {
namespace {

// The CLIENT LIST lines of the connections blocked in BLPOP.
std::vector<std::string> blocked_clients(RedisProbe& probe) {
  const std::string list = probe.command({"CLIENT", "LIST"});
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < list.size()) {
    const auto end = std::min(list.find('\n', start), list.size());
    const std::string line = list.substr(start, end - start);
    if (line.find(" cmd=blpop ") != std::string::npos) out.push_back(line);
    start = end + 1;
  }
  return out;
}

// The id=N of a CLIENT LIST line.
std::string client_id(const std::string& line) {
  const auto at = line.find("id=");
  return line.substr(at + 3, line.find(' ', at) - at - 3);
}

// A redis-server, its probe, and a client that holds ("g", "x"). Waiters poll once a
// second at most (polling_every(1s), also capped at a third of waiter_ttl_ms=3000), so
// a wait that ends sooner was ended by a push or a stop, not by its BLPOP's timeout.
class RedisWaitLine : public ::testing::Test {
 protected:
  void SetUp() override {
    held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(held);
  }

  // Gives the held lock up and expects `waiting` to be granted; returns its lease.
  Lease release_and_expect_granted(std::future<Lease>& waiting) {
    held.release();
    EXPECT_EQ(waiting.wait_for(kNoHang), std::future_status::ready);
    Lease got = waiting.get();
    EXPECT_TRUE(got) << "the waiter was not handed the lock";
    return got;
  }

  RedisServer server;
  RedisProbe probe{server};
  Client holder = Client::open(server.uri());
  Lease held;
};

TEST_F(RedisWaitLine, AQueuedWaiterBlocksOnItsOwnListAndIsHandedTheLockThere) {
  Client waiter = Client::open(server.uri(), polling_every(1s));
  auto waiting = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(kNoHang));
  ASSERT_EQ(queued(probe, "g", "x"), 1);
  ASSERT_TRUE(eventually([&] { return blocked_clients(probe).size() == 1; }))
      << "the waiter is not blocked in BLPOP";
  const std::string line = blocked_clients(probe).at(0);
  EXPECT_NE(line.find(" flags=b "), std::string::npos) << line;
  EXPECT_EQ(subscribers(probe, "g", "x"), 0) << "a waiter with a line of its own subscribed";

  const std::uint64_t before = held.token();
  Lease got = release_and_expect_granted(waiting);
  EXPECT_GT(got.token(), before);
  got.release();
  // The wake list went with the push its BLPOP took; nothing else is left.
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST_F(RedisWaitLine, AGrantAfterAWaitLongerThanItsLeaseIsNotCountedLost) {
  // Polls at most every 33 s; the lease is 1 s, and the holder keeps the lock 3 s. The
  // grant comes from behind a wait, and its lease must be counted from when that wait
  // ended, not when it began.
  ClientOptions slow_polls = polling_every(40s);
  Client waiter = Client::open(uri_with(server, "waiter_ttl_ms=100000"), slow_polls);
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.lock("g", "x", ttl(1s)).acquire(Mode::exclusive, Wait::up_to(kNoHang));
  });
  ASSERT_TRUE(eventually([&] { return blocked_clients(probe).size() == 1; }));
  std::this_thread::sleep_for(3s);
  Lease got = release_and_expect_granted(waiting);
  ASSERT_TRUE(got);
  std::this_thread::sleep_for(1500ms);  // the watchdog renews the 1 s lease meanwhile
  EXPECT_FALSE(got.lost()) << "a fresh grant was reported lost";
  EXPECT_FALSE(holder.lock("g", "x").acquire(Mode::exclusive, Wait::none()))
      << "the lease ran out on Redis";
}

TEST_F(RedisWaitLine, ACancelledBlockedWaiterEndsItsWaitAndLeavesNothing) {
  // A wait of up to 30 s per BLPOP: only the stop's own push can end it in time.
  ClientOptions slow_polls = polling_every(1s);
  slow_polls.retry.initial = slow_polls.retry.max = 30s;
  Client waiter = Client::open(uri_with(server, "waiter_ttl_ms=100000"), slow_polls);
  std::stop_source stop;
  auto waiting =
      acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::forever(), stop.get_token());
  ASSERT_TRUE(eventually([&] { return blocked_clients(probe).size() == 1; }));
  stop.request_stop();
  // Well before the BLPOP's own 30 s.
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready) << "the stop did not end the wait";
  EXPECT_FALSE(waiting.get());
  EXPECT_EQ(queued(probe, "g", "x"), 0) << "a cancelled waiter is still queued";
  held.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());

  // The line is fit for the next waiter: it blocks again, and is handed the lock.
  held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto next = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(kNoHang));
  ASSERT_TRUE(eventually([&] { return blocked_clients(probe).size() == 1; }));
  release_and_expect_granted(next);
}

TEST_F(RedisWaitLine, AWaiterWhoseLineIsKilledQueuesAgainAndIsStillGranted) {
  Client waiter = Client::open(server.uri(), polling_every(1s));
  auto waiting = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(kNoHang));
  ASSERT_TRUE(eventually([&] { return blocked_clients(probe).size() == 1; }));
  const std::string killed = client_id(blocked_clients(probe).at(0));
  ASSERT_EQ(probe.command({"CLIENT", "KILL", "ID", killed}), "1");
  // It blocks again, on a new connection.
  ASSERT_TRUE(eventually([&] {
    const auto now = blocked_clients(probe);
    return now.size() == 1 && client_id(now[0]) != killed;
  })) << "the waiter did not wait again on a new line";
  EXPECT_EQ(queued(probe, "g", "x"), 1);
  release_and_expect_granted(waiting).release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST_F(RedisWaitLine, WaitersBeyondTheLinesWaitOnTheSubscriberAndAllAreGrantedInOrder) {
  Client waiter = Client::open(uri_with(server, "wait_lines=1"), polling_every(1s));
  std::vector<std::future<Lease>> waiting;
  for (long long n = 1; n <= 3; ++n) {
    waiting.push_back(
        acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(kNoHang), {}, n));
    ASSERT_EQ(queued(probe, "g", "x"), n);
  }
  ASSERT_TRUE(eventually([&] {
    return blocked_clients(probe).size() == 1 && subscribers(probe, "g", "x") == 1;
  })) << "expected one waiter on its line and the others on the subscriber";

  // Each is handed the lock in its turn, whichever way it waits.
  std::uint64_t last = held.token();
  held.release();
  for (auto& next : waiting) {
    ASSERT_EQ(next.wait_for(kNoHang), std::future_status::ready);
    Lease got = next.get();
    ASSERT_TRUE(got);
    EXPECT_GT(got.token(), last);
    last = got.token();
  }
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST_F(RedisWaitLine, WithNoLinesEveryWaiterWaitsOnTheSubscriber) {
  Client waiter = Client::open(uri_with(server, "wait_lines=0"));
  auto waiting = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(kNoHang));
  ASSERT_TRUE(eventually([&] { return subscribers(probe, "g", "x") == 1; }));
  EXPECT_TRUE(blocked_clients(probe).empty());
  release_and_expect_granted(waiting);
}

TEST_F(RedisWaitLine, TheListOfAWaiterOnTheSubscriberGoesWithItsPickUp) {
  // On the subscriber, so nobody pops the list the release pushes to.
  Client waiter = Client::open(uri_with(server, "wait_lines=0"));
  const std::vector<std::string> entries = [&] {
    auto waiting = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(kNoHang));
    auto queue = queue_of(probe, "g", "x");
    release_and_expect_granted(waiting).release();
    return queue;
  }();
  ASSERT_EQ(entries.size(), 1u);
  // The pick-up deleted the list it did not need.
  EXPECT_EQ(probe.command({"EXISTS", lock_tag("g", "x") + ":k:" + entries[0]}), "0");
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing
