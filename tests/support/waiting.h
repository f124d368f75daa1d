// support/waiting.h — small helpers shared by the engine tests: bounded polling for
// something to happen, client options that make failure tests end quickly, and a
// check that a call fails with a given error, and how a waiter's acquire ended.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "warden/error.h"
#include "warden/lease.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden::testing {

using namespace std::chrono_literals;

// Upper bound for something that should happen "at once" (a refused call, a wait that
// ends at its deadline, a cancelled wait): a round trip plus scheduling noise in a
// sanitizer build on a fully loaded 2-core machine. It is the engine tests' one slack for
// "promptly"; the tests that use it check that something ended, never how fast.
inline constexpr Clock::duration kPrompt = 2s;

// Upper bound for a waiter started on a thread of its own to show in the backend's queue,
// where its acquire first opens a session (PostgreSQL forks a backend and runs a SCRAM
// exchange, MariaDB a thread and a handshake): beside two CPU hogs and the sanitizer run
// that took more than 5 s. A waiter it bounds must itself wait longer (kQueued + the
// rest of the case).
inline constexpr Clock::duration kQueued = 30s;

// Polls `pred` until it holds (true) or `timeout` passes (false).
inline bool eventually(const std::function<bool()>& pred, Clock::duration timeout = 5s) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Client options with a short op_timeout, so failure tests end quickly.
inline ClientOptions quick_options(std::chrono::milliseconds op_timeout = 1000ms) {
  ClientOptions options;
  options.op_timeout = op_timeout;
  return options;
}

// For a case that is not about timeouts: a generous op_timeout, as starting a PostgreSQL
// session (a backend fork and a SCRAM exchange) beside two CPU hogs and the sanitizer run
// has taken more than 3 s, once more than 5 s.
inline ClientOptions unhurried_options() { return quick_options(10'000ms); }

inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Runs `f`, which must throw Error(want), and returns how long it took.
template <class F>
Clock::duration fails_with(Errc want, F&& f) {
  const auto start = Clock::now();
  try {
    f();
    ADD_FAILURE() << "did not throw; wanted " << to_string(want);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), want) << e.what();
  }
  return Clock::now() - start;
}

// For a failure message: how a waiter's acquire ended, if it has ("still waiting",
// "granted token T", "no grant", or the error it threw). A wait that ended with an
// error is a different defect from one that was granted a held lock.
inline std::string outcome(std::future<Lease>& waiter) {
  if (waiter.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return "still waiting";
  try {
    Lease lease = waiter.get();
    return lease ? "granted token " + std::to_string(lease.token()) : "no grant";
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
}

}  // namespace warden::testing
