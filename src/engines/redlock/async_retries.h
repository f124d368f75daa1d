// engines/redlock/async_retries.h — redlock://'s asynchronous acquires: every one driven
// by one thread per Client, however many wait.
//
// A redlock:// wait has nothing to be woken by: the masters keep no queue, and a wait is
// an attempt (a vote of every master, then the fence or the undo) repeated after a
// pause until it is granted, its deadline passes or it is cancelled (redlock_engine.cc).
// Here each wait is its next attempt's time: the thread makes the attempt that is due
// (one at a time, each bounded by the masters' round timeout, as the blocking acquire's
// is), and between two attempts tells the waits that were cancelled or whose deadline
// passed, so no wait is told later than one attempt past its bound. A wait that is not
// attempting holds nothing but its place in the timers.
//
// Outcomes are told on the thread and must not block it. stop() ends the thread; the
// engine calls it first in its destructor, also from a callback on the thread itself.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/engine.h"
#include "core/wait_inbox.h"
#include "core/wait_timers.h"

namespace warden::engines::redlock {

class AsyncRetries : public std::enable_shared_from_this<AsyncRetries> {
 public:
  // What one attempt decided: the grant; or when to attempt again (`again`), and what the
  // wait ends with if its deadline passes first (`at_deadline`: nothing, or the error of
  // masters that could not be reached); or the end (neither: told nothing). An attempt
  // throws Error for a wait that failed.
  struct Step {
    std::optional<core::Granted> granted;
    std::optional<Clock::time_point> again;
    std::exception_ptr at_deadline;
  };
  using Attempt = std::function<Step(const core::AcquireRequest&)>;

  static std::shared_ptr<AsyncRetries> start();
  ~AsyncRetries();
  AsyncRetries(const AsyncRetries&) = delete;
  AsyncRetries& operator=(const AsyncRetries&) = delete;

  // Engine::acquire_async's contract: `done` is called once, on the thread. `attempt` is
  // the wait's own (it keeps the wait's count of retries and collisions).
  void acquire(core::AcquireRequest request, Attempt attempt, core::Engine::AcquireDone done);

  // Ends the thread; waits for it unless called on it. Waits still pending are told
  // Error(unavailable); nothing is called after stop() returns.
  void stop();

 private:
  struct Wait;
  using Waits = std::unordered_map<std::uint64_t, std::unique_ptr<Wait>>;

  AsyncRetries();
  void run();
  void turn();
  void attempt(Waits::iterator it);
  void tell(Waits::iterator it, std::optional<core::Granted> granted, std::exception_ptr error);
  void schedule(Wait& w, std::optional<Clock::time_point> at);

  core::WaitInbox<Wait> inbox_;  // before the waits, whose stop callbacks use it

  // The thread's own.
  Waits waits_;
  core::WaitTimers timers_;     // next attempts
  core::WaitTimers deadlines_;  // of waits that wait
};

}  // namespace warden::engines::redlock
