// warden/asio.h — asynchronous acquires with asio's completion tokens (optional: only
// for programs that use asio; Debian's libasio-dev). Nothing else in warden needs asio.
//
//   asio::awaitable<void> ship(warden::Lock order) {
//     warden::Lease lease = co_await warden::async_acquire(
//         order, warden::Mode::exclusive, warden::Wait::up_to(2s), asio::use_awaitable);
//     if (!lease) co_return;  // timed out
//     ...
//   }
//
// Any token works (asio::use_awaitable, asio::deferred, a callback taking
// (std::exception_ptr, warden::Lease)). The completion runs on the token's associated
// executor (the system executor if it has none), and the wait keeps that executor's
// work count up until then. asio's per-operation cancellation (a bound cancellation
// slot, e.g. from asio::experimental::parallel_group or a co_spawn's cancellation
// state) ends the wait as AcquireHandle::cancel does: the handler gets an empty Lease,
// and nothing is left on the backend.
#pragma once

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/executor_work_guard.hpp>
#include <exception>
#include <memory>
#include <utility>

#include "warden/async.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/multi_lock.h"
#include "warden/semaphore.h"
#include "warden/types.h"

namespace warden {

namespace asio_detail {

// Starts one acquire through `start` (a Lock's, a Semaphore's or a MultiLock's
// acquire_async, whose outcome is a Result: Lease or MultiLease) for an asio handler: its
// outcome is dispatched to the handler's executor, and the handler's cancellation slot
// cancels it.
template <class Result, class Handler, class Start>
void initiate(Handler handler, Start start) {
  auto slot = asio::get_associated_cancellation_slot(handler);
  auto work = asio::make_work_guard(asio::get_associated_executor(handler));
  // The callback is a std::function, which copies: the handler (often move-only)
  // waits in a shared slot for the one call.
  auto waiting = std::make_shared<std::pair<Handler, decltype(work)>>(std::move(handler),
                                                                     std::move(work));
  AcquireHandle handle = start([waiting](std::exception_ptr error, Result lease) {
    auto executor = waiting->second.get_executor();
    asio::dispatch(executor, [waiting, error, lease = std::move(lease)]() mutable {
      Handler done = std::move(waiting->first);
      waiting->second.reset();
      std::move(done)(error, std::move(lease));
    });
  });
  if (slot.is_connected()) {
    slot.assign([handle](asio::cancellation_type) { handle.cancel(); });
  }
}

}  // namespace asio_detail

// Lock::acquire_async with an asio completion token; completes with
// (std::exception_ptr, Lease): a Lease, an empty one (timed out or cancelled), or the
// warden::Error. Bad input throws at once, as Lock::acquire_async does.
template <class CompletionToken>
auto async_acquire(Lock lock, Mode mode, Wait wait, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, Lease)>(
      [lock = std::move(lock), mode, wait](auto handler) mutable {
        asio_detail::initiate<Lease>(std::move(handler), [&](AcquireCallback done) {
          return lock.acquire_async(mode, wait, std::move(done));
        });
      },
      token);
}

// Semaphore::acquire_async (n permits) with an asio completion token; as above.
template <class CompletionToken>
auto async_acquire(Semaphore semaphore, std::uint32_t n, Wait wait, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, Lease)>(
      [semaphore = std::move(semaphore), n, wait](auto handler) mutable {
        asio_detail::initiate<Lease>(std::move(handler), [&](AcquireCallback done) {
          return semaphore.acquire_async(n, wait, std::move(done));
        });
      },
      token);
}

// MultiLock::acquire_async with an asio completion token; completes with
// (std::exception_ptr, MultiLease): every member held, none (timed out or cancelled: the
// members taken by then released), or the warden::Error.
template <class CompletionToken>
auto async_acquire(MultiLock multi, Wait wait, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, MultiLease)>(
      [multi = std::move(multi), wait](auto handler) mutable {
        asio_detail::initiate<MultiLease>(std::move(handler),
                                          [&](MultiLock::AcquireCallback done) {
                                            return multi.acquire_async(wait, std::move(done));
                                          });
      },
      token);
}

}  // namespace warden
