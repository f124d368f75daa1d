#include "warden/lock.h"

#include "core/client_state.h"
#include "core/names.h"
#include "warden/error.h"
#include "warden/lease.h"

namespace warden {

// ---- Lease ----

Lease::Lease(std::shared_ptr<detail::ClientState> client, std::shared_ptr<detail::Hold> hold,
             Mode mode) noexcept
    : client_(std::move(client)), hold_(std::move(hold)), mode_(mode) {}

Lease::Lease(Lease&& other) noexcept
    : client_(std::move(other.client_)), hold_(std::move(other.hold_)), mode_(other.mode_) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    drop();
    client_ = std::move(other.client_);
    hold_ = std::move(other.hold_);
    mode_ = other.mode_;
  }
  return *this;
}

Lease::~Lease() { drop(); }

void Lease::drop() noexcept {
  if (!hold_) return;
  try {
    client_->release(hold_, mode_, /*report=*/false);
  } catch (...) {
    // Nobody to report to; release(report=false) hands backend failures to the
    // background retry and only throws for a broken count, which a Lease cannot have.
  }
  hold_.reset();
  client_.reset();
}

void Lease::require_valid() const {
  if (!hold_) throw Error(Errc::invalid_argument, "the Lease is empty");
}

Mode Lease::mode() const {
  require_valid();
  return mode_;
}

std::uint32_t Lease::permits() const {
  require_valid();
  return hold_->grant.permits;
}

std::uint64_t Lease::token() const {
  require_valid();
  return hold_->grant.token;
}

Sequencer Lease::sequencer() const {
  require_valid();
  const auto& g = hold_->grant;
  return Sequencer{g.key.group, g.key.name, g.mode, g.token, hold_->caching.reuse};
}

std::uint64_t Lease::reuse() const {
  require_valid();
  return hold_->caching.reuse;
}

const std::string& Lease::group() const {
  require_valid();
  return hold_->grant.key.group;
}

const std::string& Lease::name() const {
  require_valid();
  return hold_->grant.key.name;
}

std::stop_token Lease::lost_token() const {
  require_valid();
  return hold_->lost_token();
}

bool Lease::lost() const {
  require_valid();
  return hold_->lost();
}

void Lease::on_lost(std::function<void()> callback) {
  require_valid();
  if (auto now = hold_->set_on_lost(std::move(callback))) now();
}

void Lease::release() {
  if (!hold_) return;
  client_->release(hold_, mode_, /*report=*/true);  // on failure: throws, stays held
  hold_.reset();
  client_.reset();
}

void Lease::release_async(ReleaseCallback done, Executor executor) {
  if (!done) throw Error(Errc::invalid_argument, "an asynchronous release needs a callback");
  if (!hold_) {  // nothing to release, and no Client to tell it on
    if (executor) {
      executor([done] { done(nullptr); });
    } else {
      done(nullptr);
    }
    return;
  }
  client_->release_async(client_, hold_, mode_, std::move(done), std::move(executor));
  hold_.reset();
  client_.reset();
}

// ---- Lock ----

Lock::Lock(std::shared_ptr<detail::ClientState> client, std::string group, std::string name,
           LockOptions options)
    : client_(std::move(client)),
      group_(std::move(group)),
      name_(std::move(name)),
      options_(options) {}

Lease Lock::acquire(Mode mode, Wait wait, std::stop_token stop) {
  auto hold = client_->acquire(core::LockKey{group_, name_}, mode, options_, wait.deadline(),
                               std::move(stop));
  if (!hold) return Lease();
  return Lease(client_, std::move(hold), mode);
}

AcquireHandle Lock::acquire_async(Mode mode, Wait wait, AcquireCallback done, Executor executor) {
  core::require_capabilities(client_->capabilities, mode, options_);
  return AcquireHandle(client_->grant_async(
      client_, core::AcquireRequest{core::LockKey{group_, name_}, mode, options_, wait.deadline(), {}},
      std::move(done), std::move(executor)));
}

AcquireAwaitable Lock::acquire_co(Mode mode, Wait wait, Executor executor) {
  core::require_capabilities(client_->capabilities, mode, options_);
  return AcquireAwaitable([lock = *this, mode, wait, executor](AcquireCallback done) mutable {
    return lock.acquire_async(mode, wait, std::move(done), executor);
  });
}

bool Lock::locked(Lease lease) {
  if (!lease) return false;
  // The count stays in the thread's hold, which the client keeps; unlock() finds it.
  lease.hold_.reset();
  lease.client_.reset();
  return true;
}

void Lock::lock() {
  if (!locked(acquire(Mode::exclusive))) {
    throw Error(Errc::internal, "a wait without deadline or cancellation ended ungranted");
  }
}

bool Lock::try_lock() { return locked(acquire(Mode::exclusive, Wait::none())); }

void Lock::lock_shared() {
  if (!locked(acquire(Mode::shared))) {
    throw Error(Errc::internal, "a wait without deadline or cancellation ended ungranted");
  }
}

bool Lock::try_lock_shared() { return locked(acquire(Mode::shared, Wait::none())); }

void Lock::unlock_mode(Mode mode) {
  auto hold = client_->find(core::LockKey{group_, name_});
  if (!hold) {
    throw Error(Errc::not_owner, "this thread holds no count of lock " + group_ + "/" + name_);
  }
  client_->release(hold, mode, /*report=*/false);
}

void Lock::unlock() { unlock_mode(Mode::exclusive); }

void Lock::unlock_shared() { unlock_mode(Mode::shared); }

std::uint64_t Lock::token() const {
  auto hold = client_->find(core::LockKey{group_, name_});
  return hold ? hold->grant.token : 0;
}

// ---- Locks ----

Locks::Locks(std::shared_ptr<detail::ClientState> client, std::string group, LockOptions options)
    : client_(std::move(client)), group_(std::move(group)), options_(options) {}

Lock Locks::get(std::string_view name) const {
  core::validate_name(name);
  return Lock(client_, group_, std::string(name), options_);
}

Lease Locks::acquire(std::string_view name, Mode mode, Wait wait, std::stop_token stop) const {
  return get(name).acquire(mode, wait, std::move(stop));
}

}  // namespace warden
