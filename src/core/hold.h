// core/hold.h — one backend grant held by one (Client, thread, lock), with its
// reentrancy counts and lease state.
//
// Lease states:
//
//   active ──release()──▶ releasing ──confirmed──▶ released
//     │  ▲                    │
//     │  └──not confirmed─────┘ (Lease::release reports it; counts come back)
//     └──expired / dropped──▶ lost   (terminal: never renewed back)
//
// Only an active lease is renewed, and only an active lease can become lost, so a
// lease released normally never fires its lost signal.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <stop_token>
#include <cstdint>

#include "core/engine.h"

namespace warden::detail {

class ClientState;

// Identifies a thread for reentrancy. Unlike std::thread::id it is never reused, so a
// new thread cannot inherit the hold of a thread that ended (and handed its Lease on).
using ThreadKey = std::uint64_t;
ThreadKey this_thread_key() noexcept;

class Hold {
 public:
  enum class State { active, releasing, released, lost };

  Hold(ClientState* client, core::GrantRef grant, Clock::time_point expires,
       Clock::time_point granted_at, ThreadKey thread);

  // Constant after construction.
  ClientState* const client;  // outlives the hold (Leases and Locks keep it alive)
  const core::GrantRef grant;
  const Clock::time_point granted_at;
  const ThreadKey thread;  // the thread whose reentrancy counts these are

  // Reentrancy counts.
  void add(Mode mode);
  // Removes one count of `mode`; returns the counts left. Throws Error(not_owner) if
  // there is no count of that mode.
  int remove(Mode mode);
  int counts() const;

  // Lease state.
  State state() const;
  Clock::time_point expires() const;
  // Moves the local expiry later (a renewal); false unless active.
  bool extend(Clock::time_point expires);
  // active → releasing; false if the lease is not active (lost or being released).
  bool begin_release();
  void finish_release();  // releasing → released
  void abort_release();   // releasing → active (the backend did not confirm)
  // active → lost: fires the stop token and returns the callback to run (outside any
  // lock). Returns an empty function and does nothing if the lease is not active.
  std::function<void()> mark_lost();
  bool lost() const;

  std::stop_token lost_token() const { return lost_source_.get_token(); }
  // Stores the callback, or returns it to be run at once if the lease is already lost.
  std::function<void()> set_on_lost(std::function<void()> callback);

 private:
  mutable std::mutex mu_;
  int exclusive_ = 0;               // guarded by mu_
  int shared_ = 0;                  // guarded by mu_
  State state_ = State::active;     // guarded by mu_
  Clock::time_point expires_;       // guarded by mu_
  std::function<void()> on_lost_;   // guarded by mu_
  std::stop_source lost_source_;
};

}  // namespace warden::detail
