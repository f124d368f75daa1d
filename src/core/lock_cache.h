// core/lock_cache.h — the grants a Client keeps after their release (LockOptions::cache),
// so that its next acquire of the same lock needs no I/O.
//
// A cached grant stays granted on the backend and is renewed like a held one (its hold,
// which belongs to no thread, stays with the watchdog). It is given back:
//   - on a revoke: the backend says another client asks for the lock. A grant cached
//     idle goes at once; one a thread holds is marked and goes when that thread releases;
//   - when it has been unused for `idle` (a sweeper thread of the cache's own);
//   - when the cache is full (the longest unused goes) or the Client closes.
//
// Revokes can overtake what they revoke: one may arrive while its grant is still on its
// way to the cache (the backend answered the acquire, the client has not yet registered
// it), or come while a thread holds it. Such a revoke is remembered by (lock, token), per
// grant: one client can hold several shared grants of one lock (one per thread), and
// each revoke must find its own, in whichever order they come. It is applied when that
// grant is parked or released.
// A revoke of everything (the engine may have missed some) bumps the epoch instead:
// every grant asked for before it counts as revoked.
//
// The cache only decides; the Client gives back (its `give_back` function), always
// outside the cache's lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/hold.h"

namespace warden::core {

class LockCache {
 public:
  using Holds = std::vector<std::shared_ptr<detail::Hold>>;
  using GiveBack = std::function<void(Holds)>;

  LockCache(std::size_t capacity, std::chrono::milliseconds idle, GiveBack give_back);
  // Stops the sweeper. Grants still cached are the Client's to give back (drain) first.
  ~LockCache();
  LockCache(const LockCache&) = delete;
  LockCache& operator=(const LockCache&) = delete;

  // The revoke epoch now: a hold asked for at this epoch records it (Hold::Caching).
  std::uint64_t epoch() const;

  struct Taken {
    std::shared_ptr<detail::Hold> hit;  // the cached grant of the lock in the mode asked
    Holds give_back;  // a cached grant of the lock that cannot serve (other mode, lost)
  };
  // Takes the cached grant of `lock` ("group/name") out of the cache: a hit if it was
  // asked in `mode` with this `ttl` and `lock_delay` (a grant asked otherwise would
  // serve the request with a lease or a delay it did not ask for: it goes back).
  Taken take(const std::string& lock, Mode mode, std::chrono::milliseconds ttl,
             std::chrono::milliseconds lock_delay);

  // Keeps `parked` (an active hold of no thread, watched by the watchdog). Returns what
  // to give back now: `parked` itself if its grant was revoked, or the longest unused
  // grant if the cache was full.
  Holds park(std::shared_ptr<detail::Hold> parked);

  // Whether a grant that a thread held with caching must now really be released: a
  // revoke came for it while it was held (forgotten here by this call), or a revoke of
  // everything came after it was asked for.
  bool revoked(const detail::Hold& hold);

  // A revoke from the backend. Returns the cached grant to give back now, if it is idle
  // here; otherwise it is remembered for when it is parked or released.
  Holds revoke(const std::string& lock, std::uint64_t token);
  // Every grant asked for until now counts as revoked; returns those cached idle.
  Holds revoke_everything();

  // Stops the idle sweeper for good (the Client closes); nothing is given back after.
  void stop_sweeping();
  // Empties the cache (the Client closes).
  Holds drain();

  std::size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<detail::Hold> parked;
    Clock::time_point idle_since;
  };
  void sweep_loop(std::stop_token stop);
  // Requires mu_: the longest unused entry, or end().
  std::map<std::string, Entry>::iterator oldest();

  const std::size_t capacity_;
  const std::chrono::milliseconds idle_;
  const GiveBack give_back_;

  mutable std::mutex mu_;
  std::condition_variable_any changed_;
  std::map<std::string, Entry> entries_;  // by lock; guarded by mu_
  // Revokes of grants not cached when they came: by lock, the tokens. guarded by mu_
  std::map<std::string, std::set<std::uint64_t>> revoked_;
  std::size_t revoked_count_ = 0;  // tokens in revoked_; guarded by mu_
  // Requires mu_: remembers a revoke of (lock, token); takes one back (true if it was
  // remembered).
  void remember_revoke(const std::string& lock, std::uint64_t token);
  bool take_revoke(const std::string& lock, std::uint64_t token);
  std::uint64_t epoch_ = 0;  // guarded by mu_
  std::jthread sweeper_;     // started by the first park; guarded by mu_
  bool stopped_ = false;     // guarded by mu_
};

}  // namespace warden::core
