// support/async_outcome.h — records what an asynchronous acquire's callback was given
// (warden/async.h): how often it was called, on which thread, with which error and Lease
// (or MultiLease, for MultiLock::acquire_async).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "warden/async.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/types.h"

namespace warden::testing {

template <class Result>
class BasicAsyncOutcome {
 public:
  // The callback to hand to acquire_async; `this` must outlive its call.
  std::function<void(std::exception_ptr, Result)> callback() {
    return [this](std::exception_ptr error, Result lease) {
      std::lock_guard guard(mu_);
      ++calls_;
      thread_ = std::this_thread::get_id();
      error_ = error;
      lease_ = std::move(lease);
      called_.notify_all();
    };
  }
  // true once the callback was called, at the latest after `timeout`.
  bool wait_for(Clock::duration timeout) {
    std::unique_lock lock(mu_);
    return called_.wait_for(lock, timeout, [&] { return calls_ > 0; });
  }
  int calls() const {
    std::lock_guard guard(mu_);
    return calls_;
  }
  std::thread::id thread() const {
    std::lock_guard guard(mu_);
    return thread_;
  }
  std::exception_ptr error() const {
    std::lock_guard guard(mu_);
    return error_;
  }
  // The code of the warden::Error it was told; Errc::internal for none or another kind.
  Errc error_code() const {
    const std::exception_ptr error = this->error();
    if (!error) return Errc::internal;
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      return e.code();
    } catch (...) {
      return Errc::internal;
    }
  }
  bool granted() const {
    std::lock_guard guard(mu_);
    return lease_.valid();
  }
  // Told once within `timeout`, with no Lease and a warden::Error of `code`.
  ::testing::AssertionResult told_error(Errc code, Clock::duration timeout) {
    if (!wait_for(timeout)) return ::testing::AssertionFailure() << "never told";
    if (granted()) return ::testing::AssertionFailure() << "granted";
    if (error_code() != code) {
      return ::testing::AssertionFailure() << "told " << (error() ? to_string(error_code()) : "no error")
                                           << ", not " << to_string(code);
    }
    if (calls() != 1) return ::testing::AssertionFailure() << "told " << calls() << " times";
    return ::testing::AssertionSuccess();
  }
  // Told once within `timeout`, granted without an error; the grant is given back.
  ::testing::AssertionResult told_granted(Clock::duration timeout) {
    if (!wait_for(timeout)) return ::testing::AssertionFailure() << "never told";
    if (error()) return ::testing::AssertionFailure() << "told " << to_string(error_code());
    if (!granted()) return ::testing::AssertionFailure() << "not granted";
    if (calls() != 1) return ::testing::AssertionFailure() << "told " << calls() << " times";
    take();
    return ::testing::AssertionSuccess();
  }
  // The Lease it was given (empty after the first take).
  Result take() {
    std::lock_guard guard(mu_);
    return std::move(lease_);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable called_;
  int calls_ = 0;
  std::thread::id thread_;
  std::exception_ptr error_;
  Result lease_;
};

using AsyncOutcome = BasicAsyncOutcome<Lease>;

// The order in which numbered asynchronous waits were told, each releasing its Lease at
// once so that the next in line is granted: FIFO checks on any engine.
class GrantOrder {
 public:
  // The callback for wait number `i`.
  std::function<void(std::exception_ptr, Lease)> callback(int i) {
    return [this, i](std::exception_ptr error, Lease lease) {
      std::lock_guard guard(mu_);
      EXPECT_EQ(error, nullptr);
      order_.push_back(i);
      if (lease) tokens_.push_back(lease.token());
      if (lease) lease.release();  // the next in line is granted
    };
  }
  std::size_t told() const {
    std::lock_guard guard(mu_);
    return order_.size();
  }
  // Whether waits 0..n-1 were told in that order.
  bool in_order(int n) const {
    std::lock_guard guard(mu_);
    if (order_.size() != static_cast<std::size_t>(n)) return false;
    for (int i = 0; i < n; ++i) {
      if (order_[i] != i) return false;
    }
    return true;
  }
  // "told 0 1 3 2 …; tokens 41 42 44 43 …", for a failure's message.
  std::string describe() const {
    std::lock_guard guard(mu_);
    std::string out = "told";
    for (const int i : order_) out += " " + std::to_string(i);
    out += "; tokens";
    for (const auto token : tokens_) out += " " + std::to_string(token);
    return out;
  }
  // Whether the grants' tokens rose in the order told: granted in the queue's order,
  // where the queue is ordered by token (etcd://'s create_revision), whatever order the
  // waits were asked in.
  bool tokens_rising() const {
    std::lock_guard guard(mu_);
    return std::is_sorted(tokens_.begin(), tokens_.end()) &&
           std::adjacent_find(tokens_.begin(), tokens_.end()) == tokens_.end();
  }

 private:
  mutable std::mutex mu_;
  std::vector<int> order_;
  std::vector<std::uint64_t> tokens_;
};

// This process's thread count, as the kernel tells it.
inline int threads_now() {
  std::ifstream status("/proc/self/status");
  std::string word;
  while (status >> word) {
    if (word == "Threads:") {
      int n = 0;
      status >> n;
      return n;
    }
  }
  return -1;
}

}  // namespace warden::testing
