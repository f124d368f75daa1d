// Asynchronous acquires in the client core (warden/async.h) on mem://, whose engine
// waits without a thread: where outcomes run, callbacks that throw or block, executors,
// coroutines (a coroutine destroyed mid-wait cancels it), asio's executors and cancellation
// (asio::awaitable is the consumer example's: clang 14 cannot build it under ASan),
// and many waiters on one lock served in order with no thread each.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <deque>
#include <fstream>
#include <functional>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/async_outcome.h"
#include "support/waiting.h"
#include "warden/asio.h"
#include "warden/multi_lock.h"
#include "warden/async.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/semaphore.h"

namespace warden {
namespace {

using namespace std::chrono_literals;
using testing::AsyncOutcome;
using testing::eventually;

constexpr auto kPatience = 10s;

std::string table_uri(const ::testing::TestInfo* test) {
  return std::string("mem://async-") + test->name();
}

std::string uri() { return table_uri(::testing::UnitTest::GetInstance()->current_test_info()); }

std::size_t waiters(const Client& client, const std::string& name) {
  return client.inspect("g", name).waiters.size();
}


// An executor whose work the test runs itself, on its own thread.
class ManualExecutor {
 public:
  Executor executor() {
    return [this](std::function<void()> work) {
      std::lock_guard guard(mu_);
      work_.push_back(std::move(work));
    };
  }
  // Runs what was posted until `done` is true or `timeout` passes.
  bool run_until(const std::function<bool()>& done, Clock::duration timeout) {
    const auto until = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() >= until) return false;
      std::function<void()> next;
      {
        std::lock_guard guard(mu_);
        if (!work_.empty()) {
          next = std::move(work_.front());
          work_.pop_front();
        }
      }
      if (next) {
        next();
      } else {
        std::this_thread::sleep_for(1ms);
      }
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::deque<std::function<void()>> work_;
};

// The least coroutine type: starts at once, stays suspended at its end until destroyed.
struct Task {
  struct promise_type {
    Task get_return_object() {
      return Task{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { error = std::current_exception(); }
    std::exception_ptr error;
  };
  explicit Task(std::coroutine_handle<promise_type> h) : handle(h) {}
  Task(Task&& other) noexcept : handle(std::exchange(other.handle, {})) {}
  ~Task() {
    if (handle) handle.destroy();
  }
  std::coroutine_handle<promise_type> handle;
};

TEST(Async, ACallbackThatThrowsLosesItsLeaseAndLaterOutcomesStillArrive) {
  Client client = Client::open(uri());
  std::atomic<bool> threw{false};
  client.lock("g", "x").acquire_async(Mode::exclusive, Wait::none(),
                                      [&](std::exception_ptr, Lease lease) {
                                        threw = lease.valid();
                                        throw std::runtime_error("a careless callback");
                                      });
  ASSERT_TRUE(eventually([&] { return threw.load(); }, kPatience));
  // Its Lease was released as the exception left the callback: the lock is free again.
  AsyncOutcome next;
  ASSERT_TRUE(eventually(
      [&] {
        return static_cast<bool>(client.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
      },
      kPatience));
  client.lock("g", "y").acquire_async(Mode::exclusive, Wait::none(), next.callback());
  ASSERT_TRUE(next.wait_for(kPatience)) << "the completion thread stopped after a throw";
  EXPECT_TRUE(next.granted());
}

TEST(Async, ACallbackThatBlocksDelaysOtherOutcomesButNoRenewal) {
  Client client = Client::open(uri());
  LockOptions brief;
  brief.ttl = 1s;  // renewed every third of it: two thirds of slack for a late watchdog
  Lease renewed = client.lock("g", "renewed", brief).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(renewed);
  std::latch release_callback(1);
  std::atomic<bool> blocking{false};
  client.lock("g", "a").acquire_async(Mode::exclusive, Wait::none(),
                                      [&](std::exception_ptr, Lease) {
                                        blocking = true;
                                        release_callback.wait();
                                      });
  ASSERT_TRUE(eventually([&] { return blocking.load(); }, kPatience));
  AsyncOutcome behind;
  client.lock("g", "b").acquire_async(Mode::exclusive, Wait::none(), behind.callback());
  // Two and a half lease lengths with the completion thread blocked: without renewals the
  // lease would be lost after one.
  std::this_thread::sleep_for(2500ms);
  EXPECT_FALSE(renewed.lost()) << "a blocked callback stopped the renewals";
  EXPECT_EQ(behind.calls(), 0) << "outcomes run one after another on the completion thread";
  release_callback.count_down();
  ASSERT_TRUE(behind.wait_for(kPatience));
  EXPECT_TRUE(behind.granted());
}

TEST(Async, AnExecutorNamedRunsTheOutcome) {
  Client client = Client::open(uri());
  ManualExecutor loop;
  AsyncOutcome outcome;
  client.lock("g", "x").acquire_async(Mode::exclusive, Wait::none(), outcome.callback(),
                                      loop.executor());
  ASSERT_TRUE(loop.run_until([&] { return outcome.calls() > 0; }, kPatience));
  EXPECT_EQ(outcome.thread(), std::this_thread::get_id());
  EXPECT_TRUE(outcome.granted());
}

TEST(Async, AnExecutorThatRefusesTheWorkStillHasTheOutcomeToldOnce) {
  Client client = Client::open(uri());
  AsyncOutcome outcome;
  int offered = 0;
  client.lock("g", "x").acquire_async(Mode::exclusive, Wait::none(), outcome.callback(),
                                      [&](std::function<void()>) {
                                        ++offered;
                                        throw std::runtime_error("this loop has stopped");
                                      });
  ASSERT_TRUE(outcome.wait_for(kPatience));
  EXPECT_EQ(offered, 1);
  EXPECT_EQ(outcome.calls(), 1);
  EXPECT_TRUE(outcome.granted());
}

TEST(Async, ACoroutineResumesWithTheLeaseAndBadInputThrowsAtOnce) {
  Client client = Client::open(uri());
  ManualExecutor loop;
  std::uint64_t token = 0;
  bool finished = false;
  auto body = [&]() -> Task {
    Lease lease = co_await client.lock("g", "x").acquire_co(Mode::exclusive, Wait::none(),
                                                           loop.executor());
    token = lease.token();
    finished = true;
  };
  Task task = body();
  ASSERT_TRUE(loop.run_until([&] { return finished; }, kPatience));
  EXPECT_GT(token, 0u);
  Semaphore three = client.semaphore("g", "s", 3);
  testing::fails_with(Errc::invalid_argument, [&] { auto wait = three.acquire_co(4); });
}

TEST(Async, DestroyingTheAwaitingCoroutineCancelsItsWait) {
  Client holder = Client::open(uri());
  Client client = Client::open(uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  bool resumed = false;
  auto body = [&]() -> Task {
    Lease lease = co_await client.lock("g", "x").acquire_co(Mode::exclusive);
    resumed = true;
  };
  {
    Task task = body();
    ASSERT_TRUE(eventually([&] { return waiters(holder, "x") == 1; }, kPatience));
  }  // destroyed while it waits
  EXPECT_TRUE(eventually([&] { return waiters(holder, "x") == 0; }, kPatience))
      << "the destroyed coroutine's wait is still queued";
  held.release();
  EXPECT_TRUE(holder.lock("g", "x").acquire(Mode::exclusive, Wait::none()))
      << "the cancelled wait was granted the lock";
  EXPECT_FALSE(resumed);
}

// MultiLock::acquire_co: a coroutine resumes with every member held; one destroyed while
// it waits cancels the wait and releases the members it had taken.
TEST(Async, ACoroutineAwaitsAMultiLockAndItsDestructionReleasesTheMembersTaken) {
  Client holder = Client::open(uri());
  Client client = Client::open(uri());
  ManualExecutor loop;
  MultiLock both = client.multi({{"g", "a"}, {"g", "b"}});
  std::vector<std::uint64_t> tokens;
  bool finished = false;
  auto take_both = [&]() -> Task {
    MultiLease lease = co_await both.acquire_co(Wait::none(), loop.executor());
    tokens = lease.tokens();
    finished = true;
  };
  {
    Task task = take_both();
    ASSERT_TRUE(loop.run_until([&] { return finished; }, kPatience));
  }
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_GT(tokens[0], 0u);
  EXPECT_GT(tokens[1], 0u);

  // "b" held elsewhere: the coroutine takes "a" and waits for "b" until destroyed.
  Lease held = holder.lock("g", "b").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  bool resumed = false;
  auto wait_for_both = [&]() -> Task {
    MultiLease lease = co_await both.acquire_co(Wait::forever());
    resumed = true;
  };
  {
    Task task = wait_for_both();
    ASSERT_TRUE(eventually([&] { return waiters(holder, "b") == 1; }, kPatience));
    EXPECT_FALSE(holder.lock("g", "a").acquire(Mode::exclusive, Wait::none()))
        << "the waiting multi-lock did not hold its first member";
  }  // destroyed while it waits
  EXPECT_TRUE(eventually([&] { return waiters(holder, "b") == 0; }, kPatience));
  EXPECT_TRUE(eventually(
      [&] { return static_cast<bool>(holder.lock("g", "a").acquire(Mode::exclusive, Wait::none())); },
      kPatience))
      << "the member taken was not released";
  EXPECT_FALSE(resumed);
}

TEST(Async, ManyWaitersOnOneLockAreGrantedInOrderWithoutAThreadEach) {
  constexpr int kWaiters = 2000;
  Client holder = Client::open(uri());
  Client client = Client::open(uri());
  LockOptions fifo;
  fifo.fairness = Fairness::fifo;
  Lease held = holder.lock("g", "x", fifo).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> told{0};
  Lock lock = client.lock("g", "x", fifo);
  const int threads_before = testing::threads_now();
  for (int i = 0; i < kWaiters; ++i) {
    lock.acquire_async(Mode::exclusive, Wait::forever(), [&, i](std::exception_ptr, Lease lease) {
      {
        std::lock_guard guard(mu);
        if (lease) order.push_back(i);
      }
      ++told;
    });  // the Lease goes as the callback returns: the next waiter's turn
  }
  ASSERT_TRUE(eventually([&] { return waiters(holder, "x") == kWaiters; }, kPatience));
  const int threads_waiting = testing::threads_now();
  // The table's driver and the completion thread, at most: none per waiter.
  EXPECT_LE(threads_waiting - threads_before, 2) << threads_before << " -> " << threads_waiting;
  held.release();
  ASSERT_TRUE(eventually([&] { return told.load() == kWaiters; }, 4 * kPatience));
  std::lock_guard guard(mu);
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kWaiters));
  for (int i = 0; i < kWaiters; ++i) ASSERT_EQ(order[i], i) << "granted out of order";
}

TEST(Async, AsioCompletesOnTheTokensExecutorAndItsCancellationEndsTheWait) {
  Client holder = Client::open(uri());
  Client client = Client::open(uri());
  asio::io_context io;
  // A callback token bound to the io_context's executor: granted, told on its thread.
  std::uint64_t token = 0;
  std::thread::id told_on;
  async_acquire(client.lock("g", "x"), Mode::exclusive, Wait::none(),
                asio::bind_executor(io, [&](std::exception_ptr, Lease lease) {
                  token = lease ? lease.token() : 0;
                  told_on = std::this_thread::get_id();
                }));
  io.run();  // returns once the handler ran: the wait held the io_context's work count
  EXPECT_GT(token, 0u);
  EXPECT_EQ(told_on, std::this_thread::get_id());

  // A callback token bound to a cancellation slot: the signal ends the wait.
  Lease held = holder.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  io.restart();
  asio::cancellation_signal cancel;
  bool told = false;
  bool granted = true;
  async_acquire(client.lock("g", "y"), Mode::exclusive, Wait::forever(),
                asio::bind_executor(io, asio::bind_cancellation_slot(
                                            cancel.slot(), [&](std::exception_ptr, Lease lease) {
                                              told = true;
                                              granted = lease.valid();
                                            })));
  ASSERT_TRUE(eventually([&] { return waiters(holder, "y") == 1; }, kPatience));
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  EXPECT_TRUE(told);
  EXPECT_FALSE(granted);
  EXPECT_EQ(waiters(holder, "y"), 0u);
}

// A MultiLock through asio: every member, told on the token's executor; cancelled by the
// token's slot while it waits for its second member, the first is released again.
TEST(Async, AsioTakesAMultiLockAndItsCancellationReleasesTheMembersTaken) {
  Client holder = Client::open(uri());
  Client client = Client::open(uri());
  asio::io_context io;
  std::size_t members = 0;
  std::thread::id told_on;
  async_acquire(client.multi({{"g", "a"}, {"g", "b"}}), Wait::none(),
                asio::bind_executor(io, [&](std::exception_ptr, MultiLease both) {
                  members = both.leases().size();
                  told_on = std::this_thread::get_id();
                }));
  io.run();
  EXPECT_EQ(members, 2u);
  EXPECT_EQ(told_on, std::this_thread::get_id());

  Lease held = holder.lock("g", "b").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  io.restart();
  asio::cancellation_signal cancel;
  bool told = false;
  bool granted = true;
  async_acquire(client.multi({{"g", "a"}, {"g", "b"}}), Wait::forever(),
                asio::bind_executor(io, asio::bind_cancellation_slot(
                                            cancel.slot(), [&](std::exception_ptr, MultiLease both) {
                                              told = true;
                                              granted = both.valid();
                                            })));
  ASSERT_TRUE(eventually([&] { return waiters(holder, "b") == 1; }, kPatience));
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  EXPECT_TRUE(told);
  EXPECT_FALSE(granted);
  EXPECT_EQ(waiters(holder, "b"), 0u);
  EXPECT_TRUE(eventually(
      [&] { return holder.lock("g", "a").acquire(Mode::exclusive, Wait::none()).valid(); },
      kPatience))
      << "the member taken before the cancel was not released";
}

}  // namespace
}  // namespace warden
