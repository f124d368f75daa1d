// core/told_once.h — an asynchronous acquire's outcome handed to its caller exactly once
// (warden/async.h): a lock's, semaphore's or campaign's Lease (AsyncAcquire), a
// multi-lock's MultiLease (MultiAcquire).
//
// tell() hands the outcome to the executor; only the first call counts, and a later
// one's Result is dropped (so released). cancel() before the callback starts makes it
// get an empty Result and no error, whatever was told: a grant that raced the cancel is
// dropped, as a timed-out wait's. A callback that throws has its exception dropped:
// nobody is there to catch it.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "warden/executor.h"

namespace warden::detail {

template <class Result>
class ToldOnce {
 public:
  using Callback = std::function<void(std::exception_ptr error, Result result)>;

  ToldOnce(Callback callback, Executor executor)
      : state_(std::make_shared<State>(std::move(callback), std::move(executor))) {}

  // false once the callback has started: too late to cancel.
  bool cancel() {
    std::lock_guard guard(state_->mu);
    if (state_->started.load()) return false;
    state_->cancelled = true;
    return true;
  }
  bool started() const { return state_->started.load(); }
  // true once cancel() took effect.
  bool cancelled() const {
    std::lock_guard guard(state_->mu);
    return state_->cancelled;
  }

  void tell(std::exception_ptr error, Result result) {
    if (state_->told.exchange(true)) return;  // told twice: this Result goes
    // The executor's work must be copyable (std::function): the Result travels in a
    // shared slot, taken out by the one run.
    auto slot = std::make_shared<Result>(std::move(result));
    try {
      state_->executor([state = state_, slot, error] { run(*state, error, std::move(*slot)); });
    } catch (...) {
      // An executor that refused the work (a loop already stopped): the outcome is still
      // told once, here, rather than never.
      if (!state_->started.load()) run(*state_, error, std::move(*slot));
    }
  }

 private:
  struct State {
    State(Callback c, Executor e) : callback(std::move(c)), executor(std::move(e)) {}
    std::mutex mu;
    bool cancelled = false;  // guarded by mu
    std::atomic<bool> started{false};
    std::atomic<bool> told{false};
    Callback callback;
    const Executor executor;
  };

  static void run(State& state, std::exception_ptr error, Result result) {
    bool cancelled = false;
    {
      std::lock_guard guard(state.mu);
      if (state.started.exchange(true)) return;  // told already
      cancelled = state.cancelled;
    }
    if (cancelled) {
      result = Result();  // released: a cancelled wait leaves nothing behind
      error = nullptr;
    }
    auto callback = std::move(state.callback);
    try {
      callback(error, std::move(result));
    } catch (...) {
      // Nobody to report to (warden/async.h); its Result went with it.
    }
  }

  std::shared_ptr<State> state_;
};

}  // namespace warden::detail
