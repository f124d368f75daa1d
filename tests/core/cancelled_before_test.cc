// An acquire whose stop_token was requested before the call returns "not granted"
// without asking the backend (warden/lock.h): with the backend frozen it still returns at
// once, for a lock, a semaphore, a multi-lock and a campaign, while a count the thread
// already holds is still counted. Asking first would wait for the frozen server (here
// for op_timeout, 30 s); a loaded run once saw such an acquire wait more than 5 s for a
// MariaDB session to start.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <stop_token>

#include "support/redis_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/election.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/multi_lock.h"
#include "warden/semaphore.h"

namespace warden {
namespace {

using namespace std::chrono_literals;

// Far above any scheduling noise, far below the op_timeout a frozen server would take.
constexpr auto kBound = 10s;

template <class F>
bool returns_at_once(F&& f) {
  auto done = std::async(std::launch::async, std::forward<F>(f));
  return done.wait_for(kBound) == std::future_status::ready;
}

TEST(CancelledBeforeItBegan, AnAcquireAsksTheFrozenBackendNothing) {
  testing::RedisServer server;
  ClientOptions options;
  options.op_timeout = 30s;
  Client client = Client::open(server.uri(), options);
  Lock held = client.lock("g", "held");
  Lease first = held.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(first);
  std::stop_source stop;
  stop.request_stop();

  server.pause();
  EXPECT_TRUE(returns_at_once([&] {
    EXPECT_FALSE(client.lock("g", "x").acquire(Mode::exclusive, Wait::forever(), stop.get_token()));
  })) << "a lock asked the frozen server";
  EXPECT_TRUE(returns_at_once([&] {
    EXPECT_FALSE(client.semaphore("g", "s", 2).acquire(1, Wait::forever(), stop.get_token()));
  })) << "a semaphore asked the frozen server";
  EXPECT_TRUE(returns_at_once([&] {
    EXPECT_FALSE(
        client.multi({{"g", "m1"}, {"g", "m2"}}).acquire(Wait::forever(), stop.get_token()));
  })) << "a multi-lock asked the frozen server";
  EXPECT_TRUE(returns_at_once([&] {
    EXPECT_FALSE(client.election("g", "e").campaign("v", Wait::forever(), stop.get_token()));
  })) << "a campaign asked the frozen server";
  // Reentrancy asks the backend nothing either: the held count is counted.
  Lease again = held.acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  EXPECT_TRUE(again) << "a count this thread holds was not counted";
  server.resume();

  again.release();
  first.release();
  EXPECT_TRUE(client.lock("g", "x").acquire(Mode::exclusive, Wait::none()))
      << "the cancelled acquire left the lock taken";
}

}  // namespace
}  // namespace warden
