// warden://'s asynchronous acquires: every one on the engine's wait channel (one
// connection in WAITS mode, one thread), however many wait; a server that dies or
// freezes ends them with an error or by their deadline, never a hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/async_outcome.h"
#include "support/server_process.h"
#include "support/waiting.h"
#include "support/wardend_probe.h"
#include "warden/async.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

constexpr Clock::duration kPatience = 30s;      // for what must happen, on a loaded machine
constexpr Clock::duration kLongDeadline = 60s;  // a wait that must not run out here

// 500 waits on one lock from one Client: the server sees them all queued on a handful of
// connections (a thread and a connection each would be 500 of them, or the pool's size
// with the rest never queued), and grants them in the order asked.
TEST(WardenAsync, ManyWaitsShareOneConnectionAndAreGrantedInOrder) {
  constexpr int kWaits = 500;
  Wardend server;
  const WardendProbe probe(server.port());
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::int64_t connections_before = probe.info("connections");

  Lock lock = client.lock("g", "x");
  GrantOrder order;
  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
  }
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == kWaits; }))
      << "queued: " << probe.inspect("g/x").waiters;
  // The holder's and the waiter's control connections, the wait channel, the probe's.
  EXPECT_LE(probe.info("connections"), connections_before + 3);

  held.release();
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }));
  EXPECT_TRUE(order.in_order(kWaits)) << "granted out of order";
  EXPECT_TRUE(probe.inspect("g/x").holder_tokens.empty());
}

TEST(WardenAsync, WaitsOnAServerThatDiesAreToldUnavailable) {
  Wardend server;
  const WardendProbe probe(server.port());
  Client holder = Client::open(server.uri(), quick_options());
  Client client = Client::open(server.uri(), quick_options());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  AsyncOutcome forever, timed;
  Lock lock = client.lock("g", "x");
  AcquireHandle a = lock.acquire_async(Mode::exclusive, Wait::forever(), forever.callback());
  AcquireHandle b = lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), timed.callback());
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == 2; }));

  server.process().signal(SIGKILL);
  EXPECT_TRUE(forever.told_error(Errc::unavailable, kPatience)) << "a wait without a deadline";
  EXPECT_TRUE(timed.told_error(Errc::unavailable, kPatience)) << "a timed wait";

  // Back up (in its restart embargo, docs/server.md), the same client asks again on a
  // new connection: a try is answered, not granted while the embargo lasts.
  server.start();
  AsyncOutcome again;
  client.lock("g", "y").acquire_async(Mode::exclusive, Wait::none(), again.callback());
  ASSERT_TRUE(again.wait_for(kPatience));
  EXPECT_EQ(again.error(), nullptr);
  EXPECT_FALSE(again.granted());
}

// A wardend, g/x held by one Client, and another Client (op_timeout 500 ms) to wait on
// it: the frozen-server cases.
class WardenAsyncFrozen : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(held); }

  Wardend server;
  const WardendProbe probe{server.port()};
  Client holder = Client::open(server.uri(), quick_options(500ms));
  Client client = Client::open(server.uri(), quick_options(500ms));
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
};

// Frozen, the server answers nothing and keeps the connection open: a timed wait ends by
// its deadline plus op_timeout (not granted, or an error), a cancelled one within
// op_timeout of the cancel, and once thawed nothing of either is left.
TEST_F(WardenAsyncFrozen, WaitsEndByTheirBoundsAndLeaveNothing) {
  AsyncOutcome cancelled, timed;
  Lock lock = client.lock("g", "x");
  AcquireHandle forever = lock.acquire_async(Mode::exclusive, Wait::forever(), cancelled.callback());
  const auto timed_from = Clock::now();
  lock.acquire_async(Mode::exclusive, Wait::up_to(1s), timed.callback());
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == 2; }));

  server.process().signal(SIGSTOP);
  forever.cancel();
  const auto cancelled_at = Clock::now();
  EXPECT_TRUE(cancelled.wait_for(500ms + kPrompt)) << "a cancel waited past op_timeout";
  EXPECT_LE(Clock::now(), cancelled_at + 500ms + kPrompt);
  EXPECT_TRUE(timed.wait_for(timed_from + 1s + 500ms + kPrompt - Clock::now()))
      << "a timed wait outlived its deadline + op_timeout";
  server.process().signal(SIGCONT);
  ASSERT_TRUE(cancelled.wait_for(kPatience));
  ASSERT_TRUE(timed.wait_for(kPatience));
  EXPECT_FALSE(cancelled.granted());
  EXPECT_FALSE(timed.granted());
  EXPECT_EQ(cancelled.calls() + timed.calls(), 2);

  held.release();
  EXPECT_TRUE(eventually([&] {
    const auto state = probe.inspect("g/x");
    return state.waiters == 0 && state.holder_tokens.empty();
  })) << "a wait the freeze cut short was left on the server";
}

// A wait without a deadline on a server frozen while its connection stays open: nothing
// bounds it but the channel's liveness PING (after 1 s of quiet, answered within
// op_timeout), which ends it with `unavailable`; once thawed, nothing of it is left.
TEST_F(WardenAsyncFrozen, AWaitForeverEndsUnavailableWhenItsPingGoesUnanswered) {
  AsyncOutcome forever;
  client.lock("g", "x").acquire_async(Mode::exclusive, Wait::forever(), forever.callback());
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == 1; }));

  server.process().signal(SIGSTOP);
  EXPECT_TRUE(forever.wait_for(1s + 500ms + kPrompt))
      << "a wait on a silent connection outlived a PING and its op_timeout";
  server.process().signal(SIGCONT);
  EXPECT_TRUE(forever.told_error(Errc::unavailable, kPatience));
  // Thawed, the server finds the closed connection and drops its wait. (A release
  // before that could grant the wait on a connection already closed: the ambiguous
  // answer of any lease, held until its TTL.)
  EXPECT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == 0; }))
      << "the wait the silent connection ended was left on the server";
  held.release();
  EXPECT_TRUE(eventually([&] { return probe.inspect("g/x").holder_tokens.empty(); }));
}

}  // namespace
}  // namespace warden::testing
