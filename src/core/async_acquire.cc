#include "core/async_acquire.h"

#include <utility>

namespace warden {

namespace detail {

void AsyncAcquire::cancel() {
  // Outside any lock: the engine's stop callbacks may finish this acquire right here.
  if (outcome_.cancel()) stop_.request_stop();
}

void AsyncAcquire::finish(std::exception_ptr error, std::shared_ptr<ClientState> client,
                          std::shared_ptr<Hold> hold, Mode mode) {
  outcome_.tell(error, hold ? Lease(std::move(client), std::move(hold), mode) : Lease());
}

}  // namespace detail

void AcquireHandle::cancel() const {
  if (op_) op_->cancel();
}

bool AcquireHandle::done() const { return op_ && op_->started(); }

}  // namespace warden
