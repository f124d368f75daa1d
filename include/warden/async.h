// warden/async.h — waiting for a grant without a thread.
//
// An asynchronous acquire is state and a callback, not a blocked thread: a Client keeps
// 10,000 of them waiting with the threads it already has. Its outcome reaches the caller
// exactly once, on the Client's completion thread (one per Client, started with the first
// asynchronous acquire) or on an executor the caller names:
//
//   warden::AcquireHandle wait = order.acquire_async(
//       warden::Mode::exclusive, warden::Wait::up_to(2s),
//       [](std::exception_ptr error, warden::Lease lease) {
//         if (error) return report(error);      // backend failure (warden::Error)
//         if (!lease) return retry_later();     // timed out or cancelled
//         ship(order_id, lease.token());        // held; released when `lease` goes
//       });
//   ...
//   wait.cancel();  // ends the wait if it is still under way
//
// or from a coroutine of any kind:
//
//   warden::Lease lease = co_await order.acquire_co(warden::Mode::exclusive,
//                                                   warden::Wait::up_to(2s));
//
// (warden/asio.h adapts the same call to asio's completion tokens.)
//
// What differs from the blocking acquire (docs/async.md): an asynchronous acquire
// belongs to no thread, so it is never counted on a hold the calling thread has — every
// one is a grant of its own, as a semaphore's acquire is — and it is not kept in the
// lock cache after its release. The watchdog, the lost signal, fencing and metrics are the
// same.
#pragma once

#include <coroutine>
#include <exception>
#include <functional>
#include <memory>
#include <utility>

#include "warden/executor.h"
#include "warden/lease.h"

namespace warden {

namespace detail {
// What an AcquireHandle ends: one asynchronous acquire under way (a lock's, a
// semaphore's, a campaign's, a multi-lock's).
class PendingAcquire {
 public:
  virtual ~PendingAcquire() = default;
  virtual void cancel() = 0;
  virtual bool started() const = 0;
};
}  // namespace detail

// The outcome of one asynchronous acquire, called exactly once: (nullptr, a Lease) when
// granted; (nullptr, an empty Lease) when the wait ran out or was cancelled, leaving no
// trace on the backend; (the warden::Error, an empty Lease) when it failed. It runs on
// the Client's completion thread (or the executor named with the call); one that blocks
// delays the outcomes of the Client's other acquires, never its renewals. One that
// throws has its exception dropped (and its Lease released): nobody is there to catch it.
using AcquireCallback = std::function<void(std::exception_ptr error, Lease lease)>;

// The caller's handle on one asynchronous acquire. Cheap to copy; dropping it does not
// end the wait (cancel() does).
class AcquireHandle {
 public:
  AcquireHandle() = default;
  // Ends the wait. If the callback has not started yet, it gets an empty Lease — a grant
  // that arrived meanwhile is released, so a cancelled wait leaves nothing on the
  // backend — and once cancel() returns it will not get a Lease any more. No effect on an
  // empty handle or once the callback has started.
  void cancel() const;
  // true once the callback has started (or finished).
  bool done() const;

 private:
  friend class Election;
  friend class Lock;
  friend class MultiLock;
  friend class Semaphore;
  explicit AcquireHandle(std::shared_ptr<detail::PendingAcquire> op) : op_(std::move(op)) {}
  std::shared_ptr<detail::PendingAcquire> op_;
};

// What Lock::acquire_co (and Semaphore's, MultiLock's) returns: `co_await` it once. It
// resumes the awaiting coroutine with the Lease (or MultiLease; empty when the wait ran
// out), or throws the Error, on the Client's completion thread or the executor named.
// Destroying the awaiting coroutine while it waits cancels the wait (as
// AcquireHandle::cancel).
template <class Result>
class BasicAcquireAwaitable {
 public:
  BasicAcquireAwaitable(BasicAcquireAwaitable&& other) noexcept;
  BasicAcquireAwaitable(const BasicAcquireAwaitable&) = delete;
  BasicAcquireAwaitable& operator=(const BasicAcquireAwaitable&) = delete;
  BasicAcquireAwaitable& operator=(BasicAcquireAwaitable&&) = delete;
  ~BasicAcquireAwaitable();

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> awaiting);
  Result await_resume();

 private:
  friend class Lock;
  friend class MultiLock;
  friend class Semaphore;
  struct Outcome;
  using Callback = std::function<void(std::exception_ptr, Result)>;
  using Start = std::function<AcquireHandle(Callback)>;
  explicit BasicAcquireAwaitable(Start start);
  Start start_;
  std::shared_ptr<Outcome> outcome_;  // shared with the callback
};

using AcquireAwaitable = BasicAcquireAwaitable<Lease>;

}  // namespace warden
