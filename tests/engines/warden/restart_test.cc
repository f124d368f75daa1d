// warden:// across a wardend crash and restart on the same port: held leases are
// lost, the client reconnects by itself, grants wait out the restart embargo (STARTING)
// and fencing tokens keep increasing.
#include <gtest/gtest.h>

#include <future>
#include <stop_token>
#include <thread>

#include "support/async_outcome.h"
#include "support/observed_leaders.h"
#include "support/server_process.h"
#include "support/waiting.h"
#include "warden/async.h"
#include "warden/client.h"
#include "warden/election.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

constexpr Clock::duration kPatience = 30s;  // for what must happen, on a loaded machine

// Restarts `server` after a kill -9; returns a time no later than its new start.
Clock::time_point crash_and_restart(Wardend& server) {
  server.process().kill9();
  const auto before = Clock::now();
  server.start();
  return before;
}

TEST(WardenRestart, HeldLeaseIsLostAndTheClientReconnectsAfterTheEmbargo) {
  Wardend server;
  const auto port = server.port();
  Client client = Client::open(server.uri(), quick_options());
  LockOptions options;
  options.ttl = 1000ms;  // also the restart embargo: the longest lease ever granted
  Lease lease = client.lock("g", "x", options).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const std::uint64_t old_token = lease.token();

  const auto restarted = crash_and_restart(server);
  ASSERT_EQ(server.port(), port) << "the fixture could not restart on the same port";
  // The next renewal reaches the new server, which holds nothing: lost.
  ASSERT_TRUE(eventually([&] { return lease.lost(); }, 3s));
  EXPECT_LT(Clock::now() - restarted, options.ttl + kPrompt);

  EXPECT_NO_THROW(lease.release());  // lost: nothing to send, but the count is dropped

  // The same client acquires again once the embargo is over, with a larger token.
  Lease next = client.lock("g", "x", options).acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(next) << "no grant after the restart embargo";
  EXPECT_GE(Clock::now(), restarted + options.ttl - 25ms) << "granted during the embargo";
  EXPECT_GT(next.token(), old_token) << "fencing tokens went back across the restart";
  EXPECT_TRUE(client.check(next.sequencer()));
  next.release();
}

TEST(WardenRestart, DuringTheEmbargoATryIsNotGrantedAndAWaitRetriesUntilGrantedOrDeadline) {
  Wardend server;
  Client client = Client::open(server.uri(), quick_options());
  LockOptions options;
  options.ttl = 1500ms;
  {
    Lease lease = client.lock("g", "x", options).acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    // Confirmed before the crash: a release still in flight would be retried while the
    // server is down, and the client's connector would then be backing off.
    lease.release();
  }
  const auto restarted = crash_and_restart(server);
  Lock lock = client.lock("g", "x", options);

  // A try: not granted, at once, and not an error.
  auto start = Clock::now();
  EXPECT_FALSE(lock.acquire(Mode::exclusive, Wait::none()));
  EXPECT_LT(Clock::now() - start, kPrompt);

  // A short wait: retries, then times out at its deadline like any wait.
  start = Clock::now();
  EXPECT_FALSE(lock.acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_GE(Clock::now() - start, 300ms - 25ms);
  EXPECT_LT(Clock::now() - start, 300ms + kPrompt);

  // A cancelled wait ends promptly, also while it sleeps between retries.
  std::stop_source stop;
  auto cancelled = std::async(std::launch::async, [&] {
    return lock.acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  });
  ASSERT_EQ(cancelled.wait_for(200ms), std::future_status::timeout);
  start = Clock::now();
  stop.request_stop();
  ASSERT_EQ(cancelled.wait_for(kPrompt), std::future_status::ready);
  EXPECT_FALSE(cancelled.get());

  // A long wait: granted once the embargo is over.
  Lease lease = lock.acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(lease);
  EXPECT_GE(Clock::now(), restarted + options.ttl - 25ms);
}

// The same on the wait channel (wardend protocol 8): a wait answered STARTING is asked
// again after a pause, a cancel between two asks ends it at once, and a wait is granted
// once the embargo is over, a short one told it ran out first.
TEST(WardenRestart, DuringTheEmbargoAnAsyncWaitIsAskedAgainUntilGrantedOrEnded) {
  Wardend server;
  Client client = Client::open(server.uri(), quick_options());
  LockOptions options;
  options.ttl = 1500ms;
  Lock lock = client.lock("g", "x", options);
  {
    AsyncOutcome first;  // opens the wait channel before the crash
    lock.acquire_async(Mode::exclusive, Wait::none(), first.callback());
    ASSERT_TRUE(first.wait_for(kPatience));
    Lease lease = first.take();
    ASSERT_TRUE(lease);
    lease.release();
  }
  const auto restarted = crash_and_restart(server);

  AsyncOutcome short_wait, cancelled, long_wait;
  lock.acquire_async(Mode::exclusive, Wait::up_to(300ms), short_wait.callback());
  AcquireHandle to_cancel =
      lock.acquire_async(Mode::exclusive, Wait::forever(), cancelled.callback());
  lock.acquire_async(Mode::exclusive, Wait::up_to(kPatience), long_wait.callback());
  ASSERT_TRUE(short_wait.wait_for(kPatience));
  EXPECT_EQ(short_wait.error(), nullptr);
  EXPECT_FALSE(short_wait.granted());
  EXPECT_FALSE(cancelled.wait_for(100ms)) << "a wait without deadline ended by itself";
  to_cancel.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPrompt));
  EXPECT_EQ(cancelled.error(), nullptr);
  EXPECT_FALSE(cancelled.granted());

  ASSERT_TRUE(long_wait.wait_for(kPatience));
  EXPECT_EQ(long_wait.error(), nullptr);
  Lease lease = long_wait.take();
  ASSERT_TRUE(lease) << "no grant after the restart embargo";
  EXPECT_GE(Clock::now(), restarted + options.ttl - 25ms) << "granted during the embargo";
  EXPECT_EQ(short_wait.calls() + cancelled.calls() + long_wait.calls(), 3);
}

// An observer whose WATCH connection died with the server polls for one `poll` and then
// watches again: a proclaim after that reaches it at once, far sooner than its next poll
// could (a poll of 10 s; the looks between pushes are 100 s apart).
TEST(WardenRestart, AnObserverWatchesAgainAfterTheServerRestarted) {
  Wardend server;
  Client leader = Client::open(server.uri(), quick_options());
  Client watcher = Client::open(server.uri(), quick_options());
  ObservedLeaders observed;
  std::jthread observer = observed.observe(watcher.election("g", "e"), 10s);
  ASSERT_TRUE(observed.saw(std::nullopt)) << "the observer did not report the start";

  crash_and_restart(server);
  LockOptions options;
  options.ttl = 1000ms;
  Leadership leading =
      leader.election("g", "e", options).campaign("a", Wait::up_to(5s));  // after the embargo
  ASSERT_TRUE(leading);
  ASSERT_TRUE(observed.saw(Leader{"a", leading.term()}, 15s))
      << "the observer never looked again after its watch broke";
  leading.proclaim("b");
  EXPECT_TRUE(observed.saw(Leader{"b", leading.term()}, 2s))
      << "no push after the restart: the observer did not watch again";
  observer.request_stop();
  observer.join();  // a stop ends the wait on the new watch at once
}

}  // namespace
}  // namespace warden::testing
