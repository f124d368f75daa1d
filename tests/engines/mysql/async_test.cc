// mysql://'s asynchronous acquires (engines/mysql/mysql_waits.h): every one driven by one
// thread, with a session each but no thread each; granted in the server's queue order;
// cancelled waits leave nothing queued; waits beyond the pool's sessions queue in the
// client until one frees; a server killed under waits tells each an error once.
#include "warden/async.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "support/async_outcome.h"
#include "support/mariadb_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

constexpr Clock::duration kPatience = 30s;      // for what must happen, on a loaded machine
constexpr Clock::duration kLongDeadline = 60s;  // a wait that must not run out here

bool waiting_reaches(MariaDbServer& server, const std::string& name, std::size_t n) {
  return eventually([&] { return server.waiting_sessions("g", name) == n; }, kPatience);
}

// 40 waits on one lock from one Client, asked together: each waits in GET_LOCK on a
// session of its own, without a thread of its own, and each is granted once as the one
// before releases; nothing is left queued.
TEST(MysqlAsync, ManyWaitsTakeASessionEachButNoThreadEach) {
  constexpr int kWaits = 40;
  GrantOrder order;    // before the Clients, whose waits tell it
  AsyncOutcome first;  // before the Clients, whose waits tell it
  MariaDbServer server;
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  // One wait first, so that the threads a first wait starts (the Client's completion
  // thread, the engine's waits thread) are counted before the rest.
  Lock lock = client.lock("g", "x");
  AcquireHandle first_handle =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), first.callback());
  ASSERT_TRUE(waiting_reaches(server, "x", 1));
  const int threads_before = threads_now();

  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
  }
  ASSERT_TRUE(waiting_reaches(server, "x", kWaits + 1))
      << "queued: " << server.waiting_sessions("g", "x");
  EXPECT_LE(threads_now(), threads_before + 2) << "the waits took threads of their own";

  held.release();
  ASSERT_TRUE(first.told_granted(kPatience));
  first.take();  // released: the others follow one by one
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }, kLongDeadline))
      << order.told() << " of " << kWaits << " told";
  EXPECT_TRUE(order.tokens_rising()) << order.describe();
  EXPECT_TRUE(waiting_reaches(server, "x", 0));
  Lease after = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(after) << "a wait left the lock held";
}

// Waits asked one after another, each once the one before is in the server's queue, are
// granted in that order.
TEST(MysqlAsync, WaitsAreGrantedInTheOrderTheyQueued) {
  constexpr int kWaits = 6;
  GrantOrder order;  // before the Clients, whose waits tell it
  MariaDbServer server;
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = client.lock("g", "x");
  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
    ASSERT_TRUE(waiting_reaches(server, "x", static_cast<std::size_t>(i) + 1));
  }
  held.release();
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }, kLongDeadline));
  EXPECT_TRUE(order.in_order(kWaits)) << order.describe();
  EXPECT_TRUE(order.tokens_rising()) << order.describe();
}

// 20 waits cancelled: each is told nothing, once, and none is left in the server's queue
// when it is told: a try from another Client gets the lock as soon as its holder releases.
TEST(MysqlAsync, CancelledWaitsLeaveNothingQueued) {
  constexpr int kWaits = 20;
  MariaDbServer server;
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  std::vector<AsyncOutcome> outcomes(kWaits);
  std::vector<AcquireHandle> handles;
  Lock lock = client.lock("g", "x");
  for (auto& outcome : outcomes) {
    handles.push_back(lock.acquire_async(Mode::exclusive, Wait::forever(), outcome.callback()));
  }
  ASSERT_TRUE(waiting_reaches(server, "x", kWaits));
  for (auto& handle : handles) handle.cancel();
  for (auto& outcome : outcomes) {
    ASSERT_TRUE(outcome.wait_for(kPatience)) << "a cancelled wait was never told";
    EXPECT_FALSE(outcome.granted());
    EXPECT_EQ(outcome.error(), nullptr);
  }
  EXPECT_EQ(server.waiting_sessions("g", "x"), 0u) << "a cancelled wait is still queued";
  held.release();
  Client other = Client::open(server.uri());
  EXPECT_TRUE(other.lock("g", "x").acquire(Mode::exclusive, Wait::none()))
      << "a cancelled wait took the lock";
  for (const auto& outcome : outcomes) EXPECT_EQ(outcome.calls(), 1);
}

// With pool=2, a third wait (on another lock) queues in the client without a session
// until one is free again: the first wait's grant holds its session until released. A
// try does not queue: it fails at once, as the blocking try does.
TEST(MysqlAsync, WaitsBeyondThePoolQueueInTheClientUntilASessionFrees) {
  AsyncOutcome a, b, c, tried;  // before the Clients, whose waits tell them
  MariaDbServer server;
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri() + "?pool=2");
  std::vector<Lease> held;
  for (const char* name : {"a", "b", "c", "d"}) {
    held.push_back(holder.lock("g", name).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(held.back());
  }
  AcquireHandle ha = client.lock("g", "a").acquire_async(Mode::exclusive,
                                                         Wait::up_to(kLongDeadline), a.callback());
  AcquireHandle hb = client.lock("g", "b").acquire_async(Mode::exclusive,
                                                         Wait::up_to(kLongDeadline), b.callback());
  ASSERT_TRUE(waiting_reaches(server, "a", 1));
  ASSERT_TRUE(waiting_reaches(server, "b", 1));
  AcquireHandle hc = client.lock("g", "c").acquire_async(Mode::exclusive,
                                                         Wait::up_to(kLongDeadline), c.callback());
  AcquireHandle ht =
      client.lock("g", "d").acquire_async(Mode::exclusive, Wait::none(), tried.callback());
  EXPECT_TRUE(tried.told_error(Errc::resource_exhausted, kPatience));
  // The third wait stays in the client: asked on the server, it would show waiting.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(server.waiting_sessions("g", "c"), 0u) << "a wait beyond the pool took a session";
  EXPECT_EQ(c.calls(), 0);

  held[0].release();
  ASSERT_TRUE(a.wait_for(kPatience));
  ASSERT_TRUE(a.granted()) << "the first wait was not granted at the release";
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(server.waiting_sessions("g", "c"), 0u) << "a held grant's session was taken";
  a.take().release();  // its session goes back to the pool: c may wait
  ASSERT_TRUE(waiting_reaches(server, "c", 1)) << "the queued wait never started";
  held[2].release();
  EXPECT_TRUE(c.told_granted(kPatience));
  held[1].release();
  EXPECT_TRUE(b.told_granted(kPatience));
}

// The server killed (kill -9) under waits: each is told Error(unavailable), once.
TEST(MysqlAsync, AServerKilledUnderWaitsTellsEachAnErrorOnce) {
  AsyncOutcome first, second;  // before the Clients, whose waits tell them
  MariaDbServer server;
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = client.lock("g", "x");
  AcquireHandle h1 = lock.acquire_async(Mode::exclusive, Wait::forever(), first.callback());
  AcquireHandle h2 =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), second.callback());
  ASSERT_TRUE(waiting_reaches(server, "x", 2));
  server.kill9();
  EXPECT_TRUE(first.told_error(Errc::unavailable, kPatience));
  EXPECT_TRUE(second.told_error(Errc::unavailable, kPatience));
  EXPECT_EQ(first.calls(), 1);
  EXPECT_EQ(second.calls(), 1);
}

// The server frozen (SIGSTOP) under waits: one on the pooled session (its first
// statement is never answered), one that must log in anew (never answered either). Each is
// told an error by its bound (op_timeout), not left hanging, and a wait cancelled
// meanwhile is told at once; once the server thaws, the Client acquires again.
TEST(MysqlAsync, WaitsOnAFrozenServerAreToldByTheirBound) {
  AsyncOutcome pooled, fresh, cancelled, after;  // before the Client, whose waits tell them
  MariaDbServer server;
  ClientOptions options;
  options.op_timeout = 3000ms;
  Client client = Client::open(server.uri(), options);  // leaves one idle session
  server.pause();
  const auto asked = Clock::now();
  AcquireHandle a = client.lock("g", "a").acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline),
                                                        pooled.callback());
  AcquireHandle b = client.lock("g", "b").acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline),
                                                        fresh.callback());
  AcquireHandle c = client.lock("g", "c").acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline),
                                                        cancelled.callback());
  c.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience)) << "a wait cancelled on a frozen server";
  EXPECT_FALSE(cancelled.granted());
  EXPECT_EQ(cancelled.error(), nullptr);
  ASSERT_TRUE(pooled.wait_for(options.op_timeout + kPatience)) << "never given up";
  ASSERT_TRUE(fresh.wait_for(options.op_timeout + kPatience)) << "the login was never given up";
  const auto told_after = Clock::now() - asked;
  server.resume();
  EXPECT_EQ(pooled.error_code(), Errc::deadline_exceeded);
  EXPECT_EQ(fresh.error_code(), Errc::deadline_exceeded);
  EXPECT_LT(told_after, kLongDeadline) << "told by the waits' deadline, not by op_timeout";
  EXPECT_EQ(pooled.calls() + fresh.calls(), 2);
  AcquireHandle d = client.lock("g", "a").acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline),
                                                        after.callback());
  EXPECT_TRUE(after.told_granted(kPatience)) << "the Client did not recover after the thaw";
}

}  // namespace
}  // namespace warden::testing
