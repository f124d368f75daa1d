// core/async_acquire.h — one asynchronous acquire under way (warden/async.h): its
// cancellation, and its outcome handed to the caller exactly once.
//
// The engine's request waits with stop_token(); cancel() requests it. The outcome goes
// to the executor (the Client's completion thread unless the caller named one), and
// there the callback starts: a wait cancelled before that gets an empty Lease, its grant
// (if one raced the cancellation) dropped and so released, as a timed-out wait's.
#pragma once

#include <exception>
#include <memory>
#include <stop_token>

#include "core/told_once.h"
#include "warden/async.h"
#include "warden/lease.h"
#include "warden/types.h"

namespace warden::detail {

class ClientState;
class Hold;

class AsyncAcquire : public PendingAcquire {
 public:
  AsyncAcquire(AcquireCallback callback, Executor executor)
      : outcome_(std::move(callback), std::move(executor)) {}

  std::stop_token stop_token() const { return stop_.get_token(); }
  void cancel() override;
  bool started() const override { return outcome_.started(); }

  // The outcome, from any thread: a grant (client, hold and mode: its Lease), or
  // none (timed out, cancelled), or the error. Hands it to the executor; a second call
  // is ignored (its grant released), so the callback runs once whatever an engine does.
  void finish(std::exception_ptr error, std::shared_ptr<ClientState> client = {},
              std::shared_ptr<Hold> hold = {}, Mode mode = Mode::exclusive);

 private:
  std::stop_source stop_;
  ToldOnce<Lease> outcome_;
};

}  // namespace warden::detail
