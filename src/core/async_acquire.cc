#include "core/async_acquire.h"

#include <utility>

namespace warden {

namespace detail {

AsyncAcquire::AsyncAcquire(AcquireCallback callback, Executor executor)
    : callback_(std::move(callback)), executor_(std::move(executor)) {}

void AsyncAcquire::cancel() {
  {
    std::lock_guard guard(mu_);
    if (started_.load()) return;
    cancelled_ = true;
  }
  // Outside mu_: the engine's stop callbacks may finish this acquire right here.
  stop_.request_stop();
}

void AsyncAcquire::finish(std::exception_ptr error, std::shared_ptr<ClientState> client,
                          std::shared_ptr<Hold> hold, Mode mode) {
  Lease lease = hold ? Lease(std::move(client), std::move(hold), mode) : Lease();
  if (finished_.exchange(true)) return;  // told twice: the second grant goes back
  // The executor's work must be copyable (std::function): the Lease travels in a
  // shared slot, taken out by the one run.
  auto slot = std::make_shared<Lease>(std::move(lease));
  try {
    executor_([op = shared_from_this(), slot, error] { op->run(error, std::move(*slot)); });
  } catch (...) {
    // An executor that refused the work (a loop already stopped): the outcome is still
    // told once, here, rather than never.
    if (!started_.load()) run(error, std::move(*slot));
  }
}

void AsyncAcquire::run(std::exception_ptr error, Lease lease) {
  bool cancelled = false;
  {
    std::lock_guard guard(mu_);
    if (started_.exchange(true)) return;  // told already
    cancelled = cancelled_;
  }
  if (cancelled) {
    lease = Lease();  // released: a cancelled wait leaves nothing behind
    error = nullptr;
  }
  auto callback = std::move(callback_);
  try {
    callback(error, std::move(lease));
  } catch (...) {
    // Nobody to report to (warden/async.h); its Lease went with it.
  }
}

}  // namespace detail

void AcquireHandle::cancel() const {
  if (op_) op_->cancel();
}

bool AcquireHandle::done() const { return op_ && op_->started(); }

}  // namespace warden
