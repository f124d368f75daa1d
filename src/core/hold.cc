#include "core/hold.h"

#include <algorithm>
#include <atomic>
#include <string>

namespace warden::core {

std::chrono::milliseconds loss_margin(std::chrono::milliseconds ttl) {
  // At most a quarter of the lease: a lease of a few tens of milliseconds (10 ms is
  // allowed) must not be lost the moment it is granted; it gets less allowance.
  return std::min(ttl / 100 + std::chrono::milliseconds(20), ttl / 4);
}

}  // namespace warden::core

namespace warden::detail {

ThreadKey this_thread_key() noexcept {
  static std::atomic<ThreadKey> next{0};
  thread_local const ThreadKey key = ++next;
  return key;
}

Hold::Hold(ClientState* client_state, core::GrantRef grant_ref, Clock::time_point expires_at,
           Clock::time_point granted, ThreadKey owner, Caching cache)
    : client(client_state),
      grant(std::move(grant_ref)),
      granted_at(granted),
      thread(owner),
      caching(cache),
      expires_(expires_at) {}

void Hold::add(Mode mode) {
  std::lock_guard guard(mu_);
  ++(mode == Mode::exclusive ? exclusive_ : shared_);
}

Hold::Join Hold::join(Mode mode) {
  std::lock_guard guard(mu_);
  if (lapsed_locked()) return Join::lost;
  switch (state_) {
    case State::active:
      if (grant.mode == Mode::shared && mode == Mode::exclusive) return Join::upgrade;
      ++(mode == Mode::exclusive ? exclusive_ : shared_);
      return Join::counted;
    case State::releasing:
      return Join::releasing;
    case State::released:
      return Join::released;
    case State::lost:
      return Join::lost;
  }
  return Join::lost;
}

void Hold::wait_until_settled(Clock::duration bound) const {
  std::unique_lock lock(mu_);
  settled_.wait_for(lock, bound, [&] { return state_ != State::releasing; });
}

Hold::Removed Hold::remove(Mode mode) {
  std::lock_guard guard(mu_);
  int& count = mode == Mode::exclusive ? exclusive_ : shared_;
  if (count == 0) {
    throw Error(Errc::not_owner, "this thread holds no " + std::string(to_string(mode)) +
                                     " count of lock " + grant.key.joined());
  }
  --count;
  if (exclusive_ + shared_ > 0) return Removed::counts_left;
  if (state_ != State::active || lapsed_locked()) return Removed::nothing_to_release;
  state_ = State::releasing;
  return Removed::release_now;
}

int Hold::counts() const {
  std::lock_guard guard(mu_);
  return exclusive_ + shared_;
}

Hold::State Hold::state() const {
  std::lock_guard guard(mu_);
  return state_;
}

Clock::time_point Hold::expires() const {
  std::lock_guard guard(mu_);
  return expires_;
}

Clock::time_point Hold::lost_at() const {
  std::lock_guard guard(mu_);
  return lost_at_locked();
}

Clock::time_point Hold::lost_at_locked() const {
  return expires_ - core::loss_margin(grant.ttl);
}

bool Hold::lapsed_locked() const {
  return state_ == State::active && Clock::now() >= lost_at_locked();
}

bool Hold::extend(Clock::time_point expires_at) {
  std::lock_guard guard(mu_);
  if (state_ != State::active || lapsed_locked()) return false;
  expires_ = std::max(expires_, expires_at);
  return true;
}

bool Hold::begin_release() {
  std::lock_guard guard(mu_);
  if (state_ != State::active) return false;
  state_ = State::releasing;
  return true;
}

void Hold::finish_release() {
  {
    std::lock_guard guard(mu_);
    state_ = State::released;
  }
  settled_.notify_all();
}

void Hold::abort_release(Mode mode) {
  {
    std::lock_guard guard(mu_);
    if (state_ != State::releasing) return;
    state_ = State::active;
    ++(mode == Mode::exclusive ? exclusive_ : shared_);
  }
  settled_.notify_all();
}

std::function<void()> Hold::mark_lost() {
  std::function<void()> callback;
  {
    std::lock_guard guard(mu_);
    if (state_ != State::active) return {};
    state_ = State::lost;
    callback = std::move(on_lost_);
    on_lost_ = nullptr;
  }
  lost_source_.request_stop();
  // Always return something callable so the caller can tell "became lost" apart.
  return callback ? callback : [] {};
}

bool Hold::lost() const {
  std::lock_guard guard(mu_);
  return state_ == State::lost || lapsed_locked();
}

std::function<void()> Hold::set_on_lost(std::function<void()> callback) {
  std::lock_guard guard(mu_);
  if (state_ == State::lost) return callback;
  on_lost_ = std::move(callback);
  return {};
}

}  // namespace warden::detail
