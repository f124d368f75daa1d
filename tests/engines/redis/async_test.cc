// redis://'s asynchronous acquires (engines/redis/async_waits.h): every one driven by one
// thread on one connection of its own, however many wait, granted in the queue's order;
// a server that dies ends them with an error, a frozen one by their bounds.
#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engines/redis/test_util.h"
#include "support/async_outcome.h"
#include "warden/async.h"

namespace warden::testing {
namespace {

constexpr Clock::duration kPatience = 30s;      // for what must happen, on a loaded machine
constexpr Clock::duration kLongDeadline = 60s;  // a wait that must not run out here

// Releases `lease`, asking again while its client's connection is being made anew
// (after a kill, a pause): false if that takes longer than eventually() waits.
bool released_once_reachable(Lease& lease) {
  return eventually([&] {
    try {
      lease.release();
      return true;
    } catch (const Error&) {
      return false;
    }
  });
}

long long connected_clients(RedisProbe& probe) {
  const std::string info = probe.command({"INFO", "clients"});
  const auto at = info.find("connected_clients:");
  return std::stoll(info.substr(at + std::string_view("connected_clients:").size()));
}

// 300 waits on one lock from one Client: queued on Redis without a thread or a
// connection each (the blocking acquire would take a thread per wait), and granted in the
// order asked as each releases.
TEST(RedisAsync, ManyWaitsTakeNoThreadEachAndAreGrantedInOrder) {
  constexpr int kWaits = 300;
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  // One wait first, so that the threads and connections a first wait starts (the
  // client's completion thread, its waits' thread and connection, its subscriber) are
  // counted before the rest.
  AsyncOutcome first;
  Lock lock = client.lock("g", "x");
  AcquireHandle first_handle =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "x") == 1; }));
  const int threads_before = threads_now();
  const long long connections_before = connected_clients(probe);

  GrantOrder order;
  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
  }
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "x") == kWaits + 1; }, kPatience))
      << "queued: " << queued(probe, "g", "x");
  EXPECT_LE(threads_now(), threads_before + 2) << "the waits took threads of their own";
  EXPECT_LE(connected_clients(probe), connections_before + 2)
      << "the waits took connections of their own";

  held.release();
  ASSERT_TRUE(first.wait_for(kPatience));
  first.take();  // released: the others follow one by one
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }, kPatience));
  EXPECT_TRUE(order.in_order(kWaits)) << "granted out of order";
  EXPECT_TRUE(eventually([&] { return probe.warden_keys().empty(); }, kPatience))
      << "left behind on Redis";
}

TEST(RedisAsync, WaitsOnAServerThatDiesAreToldUnavailable) {
  RedisServer server;
  RedisProbe probe(server);
  ClientOptions quick;
  quick.op_timeout = 1s;
  Client holder = Client::open(server.uri(), quick);
  Client client = Client::open(server.uri(), quick);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AsyncOutcome forever, timed;
  Lock lock = client.lock("g", "x");
  AcquireHandle a = lock.acquire_async(Mode::exclusive, Wait::forever(), forever.callback());
  AcquireHandle b = lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), timed.callback());
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "x") == 2; }));

  server.kill9();
  EXPECT_TRUE(forever.told_error(Errc::unavailable, kPatience)) << "a wait without a deadline";
  EXPECT_TRUE(timed.told_error(Errc::unavailable, kPatience)) << "a timed wait";

  // Back up, the same client waits again on a new connection and is granted.
  server.start();
  AsyncOutcome again;
  client.lock("g", "y").acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline),
                                      again.callback());
  EXPECT_TRUE(again.told_granted(kPatience));
}

// Every connection closed under the waits (CLIENT KILL: the waits' own, the subscriber's,
// the pipelines') while their looks are unanswered (CLIENT PAUSE holds them): a closed
// connection says nothing of Redis, so each wait gives back what its lost look may have
// done and asks again at once on a new one, the waits in the order they were asked
// (whatever order their last looks were written in), and is granted at the holder's
// release, the first first.
TEST(RedisAsync, WaitsWhoseConnectionsAreClosedAskAgainAndAreGranted) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri(), polling_every(100ms));
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AsyncOutcome first, second;
  Lock lock = client.lock("g", "x");
  AcquireHandle a = lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  AcquireHandle b =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), second.callback());
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "x") == 2; }));

  probe.command({"CLIENT", "PAUSE", "10000", "WRITE"});
  std::this_thread::sleep_for(500ms);  // several polls each: their looks are held
  EXPECT_GT(probe.kill_normal_clients() + probe.kill_pubsub_clients(), 0);
  probe.command({"CLIENT", "UNPAUSE"});
  // Each looks again on a new connection before the holder lets go.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(first.calls(), 0) << "a closed connection ended a wait";
  EXPECT_EQ(second.calls(), 0) << "a closed connection ended a wait";
  EXPECT_TRUE(released_once_reachable(held));
  EXPECT_TRUE(first.told_granted(kPatience)) << "the first in line";
  EXPECT_TRUE(second.told_granted(kPatience)) << "the second in line";
}

// A wait without a deadline on a server that freezes (SIGSTOP: its connections stay
// open, nothing answers) is still ended: its next look goes unanswered within op_timeout,
// as a blocking wait's does, and nothing is left once the server runs again.
TEST(RedisAsync, AWaitForeverOnAFrozenServerEndsAtItsNextUnansweredLook) {
  RedisServer server;
  RedisProbe probe(server);
  ClientOptions options = polling_every(200ms);
  options.op_timeout = 1s;
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri(), options);
  Lease held = holder.lock("g", "x", ttl(3s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AsyncOutcome forever;
  AcquireHandle handle = client.lock("g", "x", ttl(3s))
                             .acquire_async(Mode::exclusive, Wait::forever(), forever.callback());
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "x") == 1; }));

  server.pause();
  const bool told = forever.wait_for(kPatience);
  server.resume();
  ASSERT_TRUE(told) << "a wait without a deadline outlived a frozen server";
  EXPECT_TRUE(forever.told_error(Errc::deadline_exceeded, 0s));
  // Its entry lapses by waiter_ttl; once the holder lets go, nothing is left.
  EXPECT_TRUE(released_once_reachable(held));
  EXPECT_TRUE(eventually([&] { return probe.warden_keys().empty(); }, kPatience))
      << "left behind on Redis";
}

// A script the server no longer knows (SCRIPT FLUSH, as after a restart without its
// cache) is sent in full by a wait's next attempt, and by its withdraw.
TEST(RedisAsync, AWaitSendsItsScriptsAgainAfterTheServerForgotThem) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri(), polling_every(50ms));
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AsyncOutcome granted_later, cancelled;
  Lock lock = client.lock("g", "x");
  AcquireHandle waiting =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), granted_later.callback());
  AcquireHandle to_cancel =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), cancelled.callback());
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "x") == 2; }));

  probe.command({"SCRIPT", "FLUSH"});
  to_cancel.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience));
  EXPECT_EQ(cancelled.error(), nullptr);
  EXPECT_FALSE(cancelled.granted());
  EXPECT_TRUE(eventually([&] { return queued(probe, "g", "x") == 1; }))
      << "the cancelled wait's withdraw did not run";

  probe.command({"SCRIPT", "FLUSH"});
  held.release();
  EXPECT_TRUE(granted_later.told_granted(kPatience));
  EXPECT_TRUE(eventually([&] { return probe.warden_keys().empty(); }, kPatience));
}

}  // namespace
}  // namespace warden::testing
