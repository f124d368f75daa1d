// core/async_acquire.h — one asynchronous acquire under way (warden/async.h): its
// cancellation, and its outcome handed to the caller exactly once.
//
// The engine's request waits with stop_token(); cancel() requests it. The outcome goes
// to the executor (the Client's completion thread unless the caller named one), and
// there the callback starts: a wait cancelled before that gets an empty Lease, its grant
// (if one raced the cancellation) dropped and so released, as a timed-out wait's.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <stop_token>

#include "warden/async.h"
#include "warden/lease.h"
#include "warden/types.h"

namespace warden::detail {

class ClientState;
class Hold;

class AsyncAcquire : public PendingAcquire, public std::enable_shared_from_this<AsyncAcquire> {
 public:
  AsyncAcquire(AcquireCallback callback, Executor executor);

  std::stop_token stop_token() const { return stop_.get_token(); }
  void cancel() override;
  bool started() const override { return started_.load(); }

  // The outcome, from any thread: a grant (client, hold and mode: its Lease), or
  // none (timed out, cancelled), or the error. Hands it to the executor; a second call
  // is ignored (its grant released), so the callback runs once whatever an engine does.
  void finish(std::exception_ptr error, std::shared_ptr<ClientState> client = {},
              std::shared_ptr<Hold> hold = {}, Mode mode = Mode::exclusive);

 private:
  void run(std::exception_ptr error, Lease lease);

  std::stop_source stop_;
  AcquireCallback callback_;
  const Executor executor_;
  std::mutex mu_;
  bool cancelled_ = false;  // guarded by mu_
  std::atomic<bool> finished_{false};
  std::atomic<bool> started_{false};
};

}  // namespace warden::detail
