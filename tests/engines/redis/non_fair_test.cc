// redis:// non-fair requests (docs/contract.md, Fairness): "non-fair" matters only on
// arrival. A non-fair request compatible with the current holders is granted at once,
// even past waiters; one that is not queues at the tail of the same FIFO queue as the
// fair ones (":q") and is served in turn — after the waiters before it, before those
// after it — and a non-fair wait that times out leaves nothing behind.
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

// Long enough that no waiter here times out by itself: each ends by being granted, or
// the test fails on its own bound first.
constexpr auto kLongWait = 60s;
// How long a test waits for a grant the queue's order says is next.
constexpr auto kGrantBound = 20s;

LockOptions non_fair() {
  LockOptions options;
  options.fairness = Fairness::non_fair;
  return options;
}

bool ready(std::future<Lease>& f) { return f.wait_for(0s) == std::future_status::ready; }

TEST(RedisNonFair, WaiterQueuesAtTheTailAndIsServedInFifoOrder) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client first = Client::open(server.uri());
  Client unfair = Client::open(server.uri());
  Client last = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  auto first_wait =
      acquire_queued(first, probe, "x", LockOptions{}, Mode::exclusive, Wait::up_to(kLongWait), 1);
  ASSERT_EQ(queue_of(probe, "g", "x").size(), 1u) << "the fair waiter is not in the queue";
  auto unfair_wait =
      acquire_queued(unfair, probe, "x", non_fair(), Mode::exclusive, Wait::up_to(kLongWait), 2);
  ASSERT_EQ(queued(probe, "g", "x"), 2);
  const auto queue = queue_of(probe, "g", "x");
  ASSERT_EQ(queue.size(), 2u) << "the non-fair waiter did not enter the queue (:q)";
  EXPECT_EQ(queue[1].substr(0, 2), "x:") << "queue: " << describe(queue);
  auto last_wait =
      acquire_queued(last, probe, "x", LockOptions{}, Mode::exclusive, Wait::up_to(kLongWait), 3);
  ASSERT_EQ(queue_of(probe, "g", "x").size(), 3u);

  // Each release hands the lock to the next in line, and only to it.
  held.release();
  ASSERT_EQ(first_wait.wait_for(kGrantBound), std::future_status::ready);
  Lease first_lease = first_wait.get();
  ASSERT_TRUE(first_lease);
  EXPECT_FALSE(ready(unfair_wait)) << "granted while the earlier fair waiter holds";
  EXPECT_FALSE(ready(last_wait));
  const std::uint64_t first_token = first_lease.token();

  first_lease.release();
  ASSERT_EQ(unfair_wait.wait_for(kGrantBound), std::future_status::ready)
      << "the non-fair waiter was not served after the fair one before it";
  Lease unfair_lease = unfair_wait.get();
  ASSERT_TRUE(unfair_lease);
  EXPECT_FALSE(ready(last_wait)) << "the later fair waiter overtook the non-fair one";
  EXPECT_GT(unfair_lease.token(), first_token);
  const std::uint64_t unfair_token = unfair_lease.token();

  unfair_lease.release();
  ASSERT_EQ(last_wait.wait_for(kGrantBound), std::future_status::ready);
  Lease last_lease = last_wait.get();
  ASSERT_TRUE(last_lease);
  EXPECT_GT(last_lease.token(), unfair_token);
  last_lease.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST(RedisNonFair, CompatibleRequestIsGrantedAtOnceEvenPastWaiters) {
  RedisServer server;
  RedisProbe probe(server);
  Client reader = Client::open(server.uri());
  Client writer = Client::open(server.uri());
  Client unfair = Client::open(server.uri());
  Client fair_reader = Client::open(server.uri());
  Lease shared = reader.lock("g", "x").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);
  auto writing =
      acquire_queued(writer, probe, "x", LockOptions{}, Mode::exclusive, Wait::up_to(kLongWait));
  ASSERT_EQ(queue_of(probe, "g", "x").size(), 1u);

  // A fair reader would queue behind the waiting writer; a non-fair one joins the
  // reader that holds.
  EXPECT_FALSE(fair_reader.lock("g", "x").acquire(Mode::shared, Wait::none()))
      << "a fair reader overtook a waiting writer";
  Lease barged = unfair.lock("g", "x", non_fair()).acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(barged) << "a non-fair reader compatible with the holders was not granted";
  EXPECT_EQ(queue_of(probe, "g", "x").size(), 1u) << "a granted request left a queue entry";

  shared.release();
  barged.release();
  ASSERT_EQ(writing.wait_for(kGrantBound), std::future_status::ready);
  Lease written = writing.get();
  ASSERT_TRUE(written);
  written.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST(RedisNonFair, TimedOutWaiterLeavesNoTrace) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client unfair = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  auto waiting = acquire_queued(unfair, probe, "x", non_fair(), Mode::exclusive, Wait::up_to(2s));
  ASSERT_EQ(queued(probe, "g", "x"), 1);
  EXPECT_EQ(queue_of(probe, "g", "x").size(), 1u) << "the non-fair waiter is not in the queue";
  Lease never = waiting.get();
  EXPECT_FALSE(never) << "granted while another holds";

  const std::string tag = lock_tag("g", "x");
  EXPECT_EQ(probe.command({"LLEN", tag + ":q"}), "0") << "queue entry left behind";
  EXPECT_EQ(probe.command({"ZCARD", tag + ":w"}), "0") << "liveness entry left behind";
  EXPECT_EQ(probe.command({"ZCARD", tag + ":p"}), "0") << "admission left behind";
  held.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing
