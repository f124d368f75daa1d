#include "core/hold.h"

#include <algorithm>
#include <atomic>
#include <string>

namespace warden::detail {

ThreadKey this_thread_key() noexcept {
  static std::atomic<ThreadKey> next{0};
  thread_local const ThreadKey key = ++next;
  return key;
}

Hold::Hold(ClientState* client_state, core::GrantRef grant_ref, Clock::time_point expires_at,
           Clock::time_point granted, ThreadKey owner)
    : client(client_state),
      grant(std::move(grant_ref)),
      granted_at(granted),
      thread(owner),
      expires_(expires_at) {}

void Hold::add(Mode mode) {
  std::lock_guard guard(mu_);
  ++(mode == Mode::exclusive ? exclusive_ : shared_);
}

int Hold::remove(Mode mode) {
  std::lock_guard guard(mu_);
  int& count = mode == Mode::exclusive ? exclusive_ : shared_;
  if (count == 0) {
    throw Error(Errc::not_owner, "this thread holds no " + std::string(to_string(mode)) +
                                     " count of lock " + grant.key.joined());
  }
  --count;
  return exclusive_ + shared_;
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

bool Hold::extend(Clock::time_point expires_at) {
  std::lock_guard guard(mu_);
  if (state_ != State::active) return false;
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
  std::lock_guard guard(mu_);
  state_ = State::released;
}

void Hold::abort_release() {
  std::lock_guard guard(mu_);
  if (state_ == State::releasing) state_ = State::active;
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
  return state_ == State::lost;
}

std::function<void()> Hold::set_on_lost(std::function<void()> callback) {
  std::lock_guard guard(mu_);
  if (state_ == State::lost) return callback;
  on_lost_ = std::move(callback);
  return {};
}

}  // namespace warden::detail
