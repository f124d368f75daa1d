// core::CompletionThread (core/completion_thread.h): work runs in the order posted, never
// on the posting thread; and work posted while the object is being destroyed — by a
// piece of work still running on its thread — runs once on that thread, which the
// destructor joins, rather than on a second thread nobody joins.
#include "core/completion_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace warden::core {
namespace {

using namespace std::chrono_literals;

TEST(CompletionThread, RunsWorkInTheOrderPostedOnAThreadOfItsOwn) {
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  {
    CompletionThread thread;
    for (int i = 0; i < 100; ++i) {
      thread.post([&, i] {
        std::lock_guard guard(mu);
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
      });
    }
  }  // runs what is queued, then ends
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  for (const auto id : threads) {
    EXPECT_NE(id, std::this_thread::get_id());
    EXPECT_EQ(id, threads.front());
  }
}

// Before the fix the post found no thread (the destructor had taken it to join) and
// started a second one, which nobody joined: it ended by destroying the queue that held
// it, still joinable, and the process was terminated.
TEST(CompletionThread, WorkPostedDuringItsDestructionRunsOnceOnTheThreadItJoins) {
  auto completions = std::make_unique<CompletionThread>();
  CompletionThread* raw = completions.get();
  std::promise<void> started;
  std::atomic<bool> destroying{false};
  std::atomic<int> late_runs{0};
  std::thread::id first_thread, late_thread;
  raw->post([&] {
    first_thread = std::this_thread::get_id();
    started.set_value();
    while (!destroying) std::this_thread::sleep_for(1ms);
    // Time for the destructor to close the queue and wait to join this thread.
    std::this_thread::sleep_for(200ms);
    raw->post([&] {
      late_thread = std::this_thread::get_id();
      ++late_runs;
    });
  });
  started.get_future().wait();
  destroying = true;
  completions.reset();  // returns once the thread it joins has run everything
  EXPECT_EQ(late_runs.load(), 1) << "the work posted during the destruction did not run first";
  EXPECT_EQ(late_thread, first_thread) << "it ran on a second thread";
  std::this_thread::sleep_for(100ms);  // a stray thread would end (and terminate) here
  EXPECT_EQ(late_runs.load(), 1);
}

}  // namespace
}  // namespace warden::core
