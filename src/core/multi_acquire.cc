#include "core/multi_acquire.h"

#include <utility>

#include "core/async_acquire.h"
#include "core/client_state.h"

namespace warden::detail {

MultiAcquire::MultiAcquire(std::shared_ptr<ClientState> client, std::vector<LockSpec> members,
                           LockOptions options, Clock::time_point deadline,
                           MultiLock::AcquireCallback callback, Executor executor)
    : client_(std::move(client)),
      members_(std::move(members)),
      options_(options),
      deadline_(deadline),
      outcome_(std::move(callback),
               executor ? std::move(executor) : client_->completion_executor()) {}

void MultiAcquire::start() { ask(0); }

void MultiAcquire::cancel() {
  if (!outcome_.cancel()) return;  // the callback has started
  std::shared_ptr<AsyncAcquire> current;
  {
    std::lock_guard guard(mu_);
    current = current_;
  }
  // Outside mu_: the member's outcome may be told right here.
  if (current) current->cancel();
}

void MultiAcquire::ask(std::size_t member) {
  const LockSpec& spec = members_[member];
  std::shared_ptr<AsyncAcquire> op;
  try {
    op = client_->grant_async(
        client_, core::AcquireRequest{core::LockKey{spec.group, spec.name}, spec.mode, options_,
                                      deadline_, {}},
        [self = shared_from_this(), member](std::exception_ptr error, Lease lease) {
          self->told(member, error, std::move(lease));
        },
        {});
  } catch (...) {
    finish(std::current_exception(), false);
    return;
  }
  bool cancelled = false;
  {
    std::lock_guard guard(mu_);
    // This member may be granted, and the next asked for on the completion thread,
    // before grant_async returns here: the later member is the one to cancel.
    if (!finished_.load() && (!current_ || member >= current_member_)) {
      current_ = op;
      current_member_ = member;
    }
    // Read after current_ is set: a cancel() that missed this member sees it then.
    cancelled = outcome_.cancelled();
  }
  // Cancelled while this member was being asked for: its outcome (empty) ends the wait.
  if (cancelled) op->cancel();
}

void MultiAcquire::told(std::size_t member, std::exception_ptr error, Lease lease) {
  if (error || !lease) {
    finish(error, false);
    return;
  }
  taken_.push_back(std::move(lease));
  if (member + 1 == members_.size()) {
    finish(nullptr, true);
    return;
  }
  if (outcome_.cancelled()) {
    finish(nullptr, false);
    return;
  }
  ask(member + 1);
}

void MultiAcquire::finish(std::exception_ptr error, bool granted) {
  if (finished_.exchange(true)) return;
  std::vector<Lease> taken;
  taken.swap(taken_);
  {
    std::lock_guard guard(mu_);
    current_.reset();
  }
  MultiLease lease;
  if (granted) {
    lease = MultiLease(std::move(taken));
  } else {
    while (!taken.empty()) taken.pop_back();  // released, the last taken first
  }
  outcome_.tell(error, std::move(lease));
}

}  // namespace warden::detail
