// postgres://'s asynchronous acquires (engines/postgres/pg_waits.h): every one driven by
// one thread, with a session each but no thread each; granted in PostgreSQL's queue
// order; cancelled waits leave nothing queued on the server; waits beyond wait_sessions
// queue in the client until a session frees; a server killed under waits tells each an
// error once.
#include "warden/async.h"

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "support/async_outcome.h"
#include "support/postgres_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

constexpr Clock::duration kPatience = 30s;      // for what must happen, on a loaded machine
constexpr Clock::duration kLongDeadline = 60s;  // a wait that must not run out here

// Sessions waiting in PostgreSQL's queue for lock (group, name).
int waiting(PostgresServer& server, const std::string& group, const std::string& name) {
  const auto count = server.value("SELECT count(*) FROM pg_locks WHERE NOT granted AND " +
                                  pg_advisory_rows(pg_lock_id_sql(group, name)));
  return count ? std::stoi(*count) : -1;
}

bool waiting_reaches(PostgresServer& server, const std::string& name, int n) {
  return eventually([&] { return waiting(server, "g", name) == n; }, kPatience);
}

// 40 waits on one lock from one Client, asked together: each waits on a session of its
// own in PostgreSQL's queue, without a thread of its own, and each is granted once as
// the one before releases; nothing is left queued.
TEST(PgAsync, ManyWaitsTakeASessionEachButNoThreadEach) {
  constexpr int kWaits = 40;
  GrantOrder order;    // before the Clients, whose waits tell it
  AsyncOutcome first;  // before the Clients, whose waits tell it
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  Client client = Client::open(server.uri(), unhurried_options());
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
  ASSERT_TRUE(waiting_reaches(server, "x", kWaits + 1)) << "queued: " << waiting(server, "g", "x");
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

// Waits asked one after another, each once the one before is in PostgreSQL's queue, are
// granted in that order: the engine keeps the server's FIFO queue.
TEST(PgAsync, WaitsAreGrantedInTheOrderTheyQueued) {
  constexpr int kWaits = 6;
  GrantOrder order;  // before the Clients, whose waits tell it
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  Client client = Client::open(server.uri(), unhurried_options());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lock lock = client.lock("g", "x");
  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kWaits; ++i) {
    handles.push_back(
        lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), order.callback(i)));
    ASSERT_TRUE(waiting_reaches(server, "x", i + 1));
  }
  held.release();
  ASSERT_TRUE(eventually([&] { return order.told() == kWaits; }, kLongDeadline));
  EXPECT_TRUE(order.in_order(kWaits)) << order.describe();
  EXPECT_TRUE(order.tokens_rising()) << order.describe();
}

// 20 waits cancelled: each is told nothing, once, and none is left in PostgreSQL's
// queue: a try from another Client gets the lock as soon as its holder releases.
TEST(PgAsync, CancelledWaitsLeaveNothingQueued) {
  constexpr int kWaits = 20;
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  Client client = Client::open(server.uri(), unhurried_options());
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
  EXPECT_EQ(waiting(server, "g", "x"), 0) << "a cancelled wait is still queued";
  held.release();
  Client other = Client::open(server.uri(), unhurried_options());
  EXPECT_TRUE(other.lock("g", "x").acquire(Mode::exclusive, Wait::none()))
      << "a cancelled wait took the lock";
  for (const auto& outcome : outcomes) EXPECT_EQ(outcome.calls(), 1);
}

// With wait_sessions=2, a third wait (on another lock) queues in the client without a
// session until one of the first two ends; then it waits on the server and is granted.
// A try never queues behind them.
TEST(PgAsync, WaitsBeyondWaitSessionsQueueInTheClientUntilASessionFrees) {
  AsyncOutcome a, b, c, tried;  // before the Clients, whose waits tell them
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  Client client = Client::open(server.uri("?wait_sessions=2"), unhurried_options());
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
  // A try is not held back by the two waiting sessions.
  AcquireHandle ht =
      client.lock("g", "d").acquire_async(Mode::exclusive, Wait::none(), tried.callback());
  ASSERT_TRUE(tried.wait_for(kPatience)) << "a try queued behind the waits";
  EXPECT_FALSE(tried.granted());
  EXPECT_EQ(tried.error(), nullptr);
  // The third wait stays in the client: asked on the server, it would show in pg_locks.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(waiting(server, "g", "c"), 0) << "a wait beyond wait_sessions took a session";
  EXPECT_EQ(c.calls(), 0);

  held[0].release();  // a is granted: its session now holds, and c may wait
  ASSERT_TRUE(a.told_granted(kPatience));
  ASSERT_TRUE(waiting_reaches(server, "c", 1)) << "the queued wait never started";
  held[2].release();
  EXPECT_TRUE(c.told_granted(kPatience));
  held[1].release();
  EXPECT_TRUE(b.told_granted(kPatience));
}

// The server killed (kill -9) under waits: each is told Error(unavailable), once.
TEST(PgAsync, AServerKilledUnderWaitsTellsEachAnErrorOnce) {
  AsyncOutcome first, second;  // before the Clients, whose waits tell them
  PostgresServer server;
  Client holder = Client::open(server.uri(), unhurried_options());
  Client client = Client::open(server.uri(), unhurried_options());
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

// The postmaster frozen (SIGSTOP) under a Client that keeps no idle session (pool=0): a
// wait must log in, which the server never answers. It is told an error by its bound
// (op_timeout), not left hanging, and a wait cancelled meanwhile is told at once; once the
// server thaws, the Client acquires again.
TEST(PgAsync, AWaitWhoseLoginMeetsAFrozenServerIsToldByItsBound) {
  AsyncOutcome frozen, cancelled, after;  // before the Client, whose waits tell them
  PostgresServer server;
  const ClientOptions options = quick_options(3000ms);
  Client client = Client::open(server.uri("?pool=0"), options);
  Lock lock = client.lock("g", "x");
  server.process().signal(SIGSTOP);
  const auto asked = Clock::now();
  AcquireHandle a =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), frozen.callback());
  AcquireHandle b =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), cancelled.callback());
  b.cancel();
  ASSERT_TRUE(cancelled.wait_for(kPatience)) << "a wait cancelled during its login";
  EXPECT_FALSE(cancelled.granted());
  EXPECT_EQ(cancelled.error(), nullptr);
  ASSERT_TRUE(frozen.wait_for(options.op_timeout + kPatience)) << "the login was never given up";
  const auto told_after = Clock::now() - asked;
  server.process().signal(SIGCONT);
  EXPECT_FALSE(frozen.granted());
  EXPECT_EQ(frozen.error_code(), Errc::deadline_exceeded);
  EXPECT_LT(told_after, kLongDeadline) << "told by the wait's deadline, not by op_timeout";
  EXPECT_EQ(frozen.calls(), 1);
  AcquireHandle c =
      lock.acquire_async(Mode::exclusive, Wait::up_to(kLongDeadline), after.callback());
  EXPECT_TRUE(after.told_granted(kPatience)) << "the Client did not recover after the thaw";
}

}  // namespace
}  // namespace warden::testing
