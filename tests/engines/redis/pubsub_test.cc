// redis:// when pub/sub messages are lost: a waiter that misses the "look now" message
// still gets the lock, because it also polls (ClientOptions::retry, capped at a third
// of waiter_ttl_ms) and resubscribes. The waiters wait on the subscriber (wait_lines=0),
// not on connections of their own (wait_line_test.cc).
#include <gtest/gtest.h>

#include <future>
#include <stop_token>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

// Polling every 100 ms: far more often than the waiters' deadline (30 s), so a waiter
// that is granted at all was found by its polling (or its resubscription's look), not
// by luck at the end of its wait.
constexpr auto kDeadline = 30s;

TEST(RedisPubSub, WaiterWhoseSubscriptionWasDroppedIsStillGranted) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client waiter = Client::open(uri_with(server, "wait_lines=0"), polling_every(100ms));
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(kDeadline));
  ASSERT_EQ(queued(probe, "g", "x"), 1);
  ASSERT_TRUE(eventually([&] { return subscribers(probe, "g", "x") == 1; }))
      << "the waiter never subscribed to the lock's channel";

  EXPECT_GE(probe.kill_pubsub_clients(), 1);
  held.release();
  ASSERT_EQ(waiting.wait_for(kDeadline + kNoHang), std::future_status::ready)
      << "a waiting acquire outlived its deadline";
  EXPECT_TRUE(waiting.get()) << "a waiter that lost its subscription was not granted";
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST(RedisPubSub, WithPubSubDownThroughoutPollingAloneGrants) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client waiter = Client::open(uri_with(server, "wait_lines=0"), polling_every(100ms));
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::up_to(kDeadline));
  ASSERT_EQ(queued(probe, "g", "x"), 1);
  ASSERT_TRUE(eventually([&] { return subscribers(probe, "g", "x") == 1; }))
      << "the waiter never subscribed to the lock's channel";

  // Every subscriber connection is dropped as soon as it appears, so no message can
  // reach the waiter: only its polling can find the lock free.
  RedisProbe killer_probe(server);
  std::jthread killer([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      killer_probe.kill_pubsub_clients();
      std::this_thread::sleep_for(2ms);
    }
  });
  std::this_thread::sleep_for(50ms);
  held.release();
  ASSERT_EQ(waiting.wait_for(kDeadline + kNoHang), std::future_status::ready)
      << "a waiting acquire outlived its deadline";
  Lease lease;
  EXPECT_NO_THROW(lease = waiting.get()) << "a dropped subscriber failed the acquire";
  EXPECT_TRUE(lease) << "a polling waiter was not granted while pub/sub was down";
  killer.request_stop();
  killer.join();
  lease.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing
