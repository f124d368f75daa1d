#include "warden/multi_lock.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/client_state.h"
#include "core/multi_acquire.h"
#include "core/names.h"
#include "warden/error.h"

namespace warden {

// Tells the first member's loss once: to lost_token() and to the on_lost callback. It
// listens on the members' lost tokens, not through Lease::on_lost: a member counted on a
// hold the thread had already shares that hold's one callback with the caller's own
// Lease, which must keep it.
struct MultiLease::LossWatch {
  using Listener = std::stop_callback<std::function<void()>>;

  std::stop_source lost;
  std::mutex mu;
  std::function<void()> callback;  // guarded by mu
  // Last: destroyed first, so no listener runs into a half-destroyed watch.
  std::vector<std::unique_ptr<Listener>> listeners;

  void fire() {
    std::function<void()> run;
    {
      std::lock_guard guard(mu);
      if (!lost.request_stop()) return;  // told already
      run = std::move(callback);
    }
    if (run) run();
  }
};

namespace {

// Releases the leases, the last acquired first; errors are swallowed as ~Lease does.
void drop_in_reverse(std::vector<Lease>& leases) noexcept {
  while (!leases.empty()) leases.pop_back();
}

}  // namespace

MultiLease::MultiLease(std::vector<Lease> leases)
    : leases_(std::move(leases)), loss_(std::make_shared<LossWatch>()) {
  loss_->listeners.reserve(leases_.size());
  for (const Lease& lease : leases_) {
    // Runs at once if the member is lost already.
    loss_->listeners.push_back(std::make_unique<LossWatch::Listener>(
        lease.lost_token(), [watch = loss_.get()] { watch->fire(); }));
  }
}

MultiLease::MultiLease(MultiLease&& other) noexcept : loss_(std::move(other.loss_)) {
  leases_.swap(other.leases_);
}

MultiLease& MultiLease::operator=(MultiLease&& other) noexcept {
  if (this != &other) {
    drop_in_reverse(leases_);
    leases_.swap(other.leases_);
    loss_ = std::move(other.loss_);
  }
  return *this;
}

MultiLease::~MultiLease() { drop_in_reverse(leases_); }

void MultiLease::require_valid() const {
  if (leases_.empty()) throw Error(Errc::invalid_argument, "the MultiLease is empty");
}

std::vector<std::uint64_t> MultiLease::tokens() const {
  std::vector<std::uint64_t> tokens;
  tokens.reserve(leases_.size());
  for (const Lease& lease : leases_) tokens.push_back(lease.token());
  return tokens;
}

std::stop_token MultiLease::lost_token() const {
  require_valid();
  return loss_->lost.get_token();
}

bool MultiLease::lost() const {
  require_valid();
  return loss_->lost.stop_requested();
}

void MultiLease::on_lost(std::function<void()> callback) {
  require_valid();
  {
    std::lock_guard guard(loss_->mu);
    if (!loss_->lost.stop_requested()) {
      loss_->callback = std::move(callback);
      return;
    }
  }
  callback();
}

void MultiLease::release() {
  std::exception_ptr first_failure;
  for (auto it = leases_.rbegin(); it != leases_.rend(); ++it) {
    try {
      it->release();
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  std::erase_if(leases_, [](const Lease& lease) { return !lease.valid(); });
  if (first_failure) std::rethrow_exception(first_failure);
  loss_.reset();
}

std::vector<Lease> MultiLease::split() && {
  std::vector<Lease> leases;
  leases.swap(leases_);
  loss_.reset();
  return leases;
}

MultiLock::MultiLock(std::shared_ptr<detail::ClientState> client, std::vector<LockSpec> members,
                     LockOptions options)
    : client_(std::move(client)), members_(std::move(members)), options_(options) {}

MultiLease MultiLock::acquire(Wait wait, std::stop_token stop) {
  const Clock::time_point deadline = wait.deadline();
  // In one step where the engine can, unless the thread holds a member already: that
  // member is counted on its hold, which only the one-by-one path does.
  const bool holds_none = std::none_of(members_.begin(), members_.end(), [&](const LockSpec& m) {
    return client_->find(core::LockKey{m.group, m.name}) != nullptr;
  });
  if (client_->capabilities.atomic_multi && holds_none) {
    try {
      return acquire_together(deadline, stop);
    } catch (const Error& e) {
      // A set the engine cannot send in one request, refused before any I/O.
      if (e.code() != Errc::unsupported) throw;
    }
  }
  std::vector<Lease> taken;
  taken.reserve(members_.size());
  try {
    for (const LockSpec& member : members_) {
      auto hold = client_->acquire(core::LockKey{member.group, member.name}, member.mode, options_,
                                   deadline, stop);
      if (!hold) {
        drop_in_reverse(taken);
        return MultiLease();
      }
      taken.push_back(Lease(client_, std::move(hold), member.mode));
    }
  } catch (...) {
    drop_in_reverse(taken);
    throw;
  }
  return MultiLease(std::move(taken));
}

AcquireHandle MultiLock::acquire_async(Wait wait, AcquireCallback done, Executor executor) {
  if (!done) throw Error(Errc::invalid_argument, "an asynchronous acquire needs a callback");
  for (const LockSpec& member : members_) {
    core::require_capabilities(client_->capabilities, member.mode, options_);
  }
  auto op = std::make_shared<detail::MultiAcquire>(client_, members_, options_, wait.deadline(),
                                                   std::move(done), std::move(executor));
  op->start();
  return AcquireHandle(std::move(op));
}

BasicAcquireAwaitable<MultiLease> MultiLock::acquire_co(Wait wait, Executor executor) {
  for (const LockSpec& member : members_) {
    core::require_capabilities(client_->capabilities, member.mode, options_);
  }
  return BasicAcquireAwaitable<MultiLease>(
      [multi = *this, wait, executor](AcquireCallback done) mutable {
        return multi.acquire_async(wait, std::move(done), executor);
      });
}

MultiLease MultiLock::acquire_together(Clock::time_point deadline, std::stop_token stop) {
  std::vector<core::AcquireSetRequest::Member> members;
  members.reserve(members_.size());
  for (const LockSpec& m : members_) members.push_back({core::LockKey{m.group, m.name}, m.mode});
  auto holds = client_->acquire_set(members, options_, deadline, std::move(stop));
  if (holds.empty()) return MultiLease();
  std::vector<Lease> taken;
  taken.reserve(holds.size());
  for (std::size_t i = 0; i < holds.size(); ++i) {
    taken.push_back(Lease(client_, std::move(holds[i]), members_[i].mode));
  }
  return MultiLease(std::move(taken));
}

}  // namespace warden
