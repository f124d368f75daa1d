// core/hold.h — one backend grant held by one (Client, thread, lock), with its
// reentrancy counts and lease state.
//
// Lease states:
//
//   active ──last count removed──▶ releasing ──confirmed──▶ released
//     │  ▲                              │
//     │  └──────not confirmed───────────┘ (Lease::release reports it; counts come back)
//     └──expired / dropped──▶ lost   (terminal: never renewed back)
//
// Only an active lease is renewed, and only an active lease can become lost, so a
// lease released normally never fires its lost signal.
//
// An active lease past lost_at() has *lapsed*: it already counts as lost — lost() is
// true, no count joins it, its last count's removal releases nothing, no renewal
// extends it — although it stays `active` until the watchdog's thread declares it
// (mark_lost: the stop token, the callback). That thread may wake late, on a busy
// machine or behind a user callback that blocks, and the backend may grant the lock
// again at the expiry all the same.
//
// Counts join only an active hold. Removing the last count and leaving `active` is one
// step, so a Lease moved to another thread and released there can never race a
// re-acquire by the thread that owns the hold into counting on a grant that is being
// released: that thread waits until the release settles (join() says `releasing`), then
// takes a fresh grant or, if the release was not confirmed, counts on the hold again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stop_token>

#include "core/engine.h"

namespace warden::core {

// How long before its local expiry a lease counts as lost: ttl/100 for clock-rate drift
// between client and backend, and 20 ms for the watchdog's own wake-up, which on a loaded
// machine comes late (with two CPU hogs beside a sanitizer test run, more than 6 ms: the
// loss was told after mem:// had already granted the lock to the next client). At most
// ttl/4, so that a very short lease is not lost the moment it is granted.
std::chrono::milliseconds loss_margin(std::chrono::milliseconds ttl);

}  // namespace warden::core

namespace warden::detail {

class ClientState;

// Identifies a thread for reentrancy. Unlike std::thread::id it is never reused, so a
// new thread cannot inherit the hold of a thread that ended (and handed its Lease on).
using ThreadKey = std::uint64_t;
ThreadKey this_thread_key() noexcept;

// Lock caching: a cacheable grant's release may keep it in the client's cache
// (core/lock_cache.h); `epoch` is the cache's revoke epoch when the grant was asked for.
struct HoldCaching {
  bool cacheable = false;
  std::uint64_t epoch = 0;
  // The options the grant was asked with that a cache hit must match: a hit serves only
  // a request asking for the same lease length and lock delay.
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds lock_delay{0};
  // How many times the grant was taken from the cache before this hold: 0 for the hold
  // the backend granted. Fences order the holds of one grant by it (Sequencer::reuse).
  std::uint64_t reuse = 0;
};

class Hold {
 public:
  enum class State { active, releasing, released, lost };

  using Caching = HoldCaching;

  Hold(ClientState* client, core::GrantRef grant, Clock::time_point expires,
       Clock::time_point granted_at, ThreadKey thread, Caching caching = {});

  // Constant after construction.
  ClientState* const client;  // outlives the hold (Leases and Locks keep it alive)
  const core::GrantRef grant;
  const Clock::time_point granted_at;
  const ThreadKey thread;  // the thread whose reentrancy counts these are; 0: none (cached)
  const Caching caching;

  // Reentrancy counts.
  void add(Mode mode);  // a count on a new hold, before anyone else can see it

  enum class Join { counted, upgrade, releasing, released, lost };
  // Adds one count of `mode` if the hold is active and has not lapsed (`counted`);
  // otherwise changes nothing and says why: `upgrade` for an exclusive count on a shared
  // grant, `lost` for a lapsed one. Never blocks.
  Join join(Mode mode);
  // Blocks while the hold is `releasing`, at most `bound`. A release in flight is bounded
  // by the client's op_timeout; one retried in the background may take until the lease
  // expires, so callers re-check after the bound instead of waiting on.
  void wait_until_settled(Clock::duration bound) const;

  enum class Removed { counts_left, release_now, nothing_to_release };
  // Removes one count of `mode`. When it was the last count: an active hold becomes
  // `releasing` in the same step (`release_now`: the caller must finish_release or
  // abort_release it); a lost, lapsed or released one stays as it is
  // (`nothing_to_release`).
  // Throws Error(not_owner) if there is no count of that mode.
  Removed remove(Mode mode);
  int counts() const;

  // Lease state.
  State state() const;
  Clock::time_point expires() const;
  // expires() less core::loss_margin: from then on the lease is lost (see the top).
  Clock::time_point lost_at() const;
  // Moves the local expiry later (a renewal); false unless active and not yet past
  // lost_at(): a lease that read as lost is never renewed back.
  bool extend(Clock::time_point expires);
  // active → releasing; false if the lease is not active (lost or being released).
  bool begin_release();
  void finish_release();  // releasing → released
  // releasing → active with one count of `mode` back (the backend did not confirm).
  void abort_release(Mode mode);
  // active → lost: fires the stop token and returns the callback to run (outside any
  // lock). Returns an empty function and does nothing if the lease is not active.
  std::function<void()> mark_lost();
  // `lost`, or `active` past lost_at().
  bool lost() const;

  std::stop_token lost_token() const { return lost_source_.get_token(); }
  // Stores the callback, or returns it to be run at once if the lease is already lost.
  std::function<void()> set_on_lost(std::function<void()> callback);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable settled_;  // notified when `releasing` ends
  int exclusive_ = 0;                        // guarded by mu_
  int shared_ = 0;                           // guarded by mu_
  State state_ = State::active;              // guarded by mu_
  Clock::time_point expires_;                // guarded by mu_
  std::function<void()> on_lost_;            // guarded by mu_
  std::stop_source lost_source_;

  // Both require mu_.
  Clock::time_point lost_at_locked() const;
  bool lapsed_locked() const;
};

}  // namespace warden::detail
