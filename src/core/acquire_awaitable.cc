// BasicAcquireAwaitable (warden/async.h): an asynchronous acquire that resumes a
// coroutine, for a Lease (Lock, Semaphore) and a MultiLease (MultiLock).
#include <mutex>
#include <utility>

#include "warden/async.h"
#include "warden/lease.h"
#include "warden/multi_lock.h"

namespace warden {

// What the callback leaves for the coroutine, and what the coroutine's end tells the
// callback. The callback may run (on another thread) before await_suspend has returned,
// and after the awaiting coroutine was destroyed: both sides go through here.
template <class Result>
struct BasicAcquireAwaitable<Result>::Outcome {
  std::mutex mu;
  std::coroutine_handle<> awaiting;  // guarded by mu
  AcquireHandle handle;              // guarded by mu
  bool abandoned = false;            // the coroutine is gone; guarded by mu
  std::exception_ptr error;
  Result lease;
};

template <class Result>
BasicAcquireAwaitable<Result>::BasicAcquireAwaitable(Start start)
    : start_(std::move(start)), outcome_(std::make_shared<Outcome>()) {}

template <class Result>
BasicAcquireAwaitable<Result>::BasicAcquireAwaitable(BasicAcquireAwaitable&& other) noexcept
    : start_(std::move(other.start_)), outcome_(std::move(other.outcome_)) {}

template <class Result>
BasicAcquireAwaitable<Result>::~BasicAcquireAwaitable() {
  if (!outcome_) return;
  AcquireHandle handle;
  {
    std::lock_guard guard(outcome_->mu);
    outcome_->abandoned = true;
    handle = outcome_->handle;
  }
  // A no-op once the callback started (the coroutine resumed normally and is ending the
  // co_await); otherwise the wait ends and its outcome finds the coroutine gone.
  handle.cancel();
}

template <class Result>
void BasicAcquireAwaitable<Result>::await_suspend(std::coroutine_handle<> awaiting) {
  // Only locals from here: the coroutine may resume, and destroy *this, on the callback's
  // thread before start_ returns.
  const std::shared_ptr<Outcome> outcome = outcome_;
  {
    std::lock_guard guard(outcome->mu);
    outcome->awaiting = awaiting;
  }
  AcquireHandle handle = start_([outcome](std::exception_ptr error, Result lease) {
    std::coroutine_handle<> resume;
    {
      std::lock_guard guard(outcome->mu);
      if (outcome->abandoned) return;  // its Lease is released here
      outcome->error = error;
      outcome->lease = std::move(lease);
      resume = outcome->awaiting;
    }
    resume.resume();
  });
  std::lock_guard guard(outcome->mu);
  outcome->handle = std::move(handle);
}

template <class Result>
Result BasicAcquireAwaitable<Result>::await_resume() {
  if (outcome_->error) std::rethrow_exception(outcome_->error);
  return std::move(outcome_->lease);
}

template class BasicAcquireAwaitable<Lease>;
template class BasicAcquireAwaitable<MultiLease>;

}  // namespace warden
