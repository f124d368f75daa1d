// core/client_state.h — what a Client handle shares: the engine, the watchdog, the
// reentrancy table and the metrics.
//
// Reentrancy lives here and only here: engines see one acquire per backend grant and
// one release when the last count of a (thread, lock) hold goes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/async_acquire.h"
#include "core/completion_thread.h"
#include "core/engine.h"
#include "core/hold.h"
#include "core/lock_cache.h"
#include "core/metrics.h"
#include "core/watch_revokes.h"
#include "core/watchdog.h"
#include "warden/options.h"

namespace warden::detail {

class ClientState {
 public:
  ClientState(std::string uri, ClientOptions options, std::shared_ptr<core::Engine> engine);
  // Releases every grant still held (best effort, bounded by op_timeout each): closing
  // a client is like ending a session.
  ~ClientState();

  // Acquires one count of (key, mode) for the calling thread: from its existing hold
  // when reentrancy allows, from the engine otherwise. nullptr when the wait ran out
  // or was cancelled. Throws Error (would_deadlock, lost, unsupported, engine errors).
  std::shared_ptr<Hold> acquire(const core::LockKey& key, Mode mode, const LockOptions& options,
                                Clock::time_point deadline, std::stop_token stop);

  // Acquires `permits` of the semaphore `key` of `capacity` permits: always a grant of
  // its own (no reentrancy), one shared count on a hold that only the caller knows.
  // nullptr when the wait ran out or was cancelled. Throws Error (invalid_argument for
  // permits outside 1..capacity or another capacity than the backend's, unsupported,
  // engine errors).
  std::shared_ptr<Hold> acquire_permits(const core::LockKey& key, std::uint32_t capacity,
                                        std::uint32_t permits, const LockOptions& options,
                                        Clock::time_point deadline, std::stop_token stop);

  // An election's campaign for (key) with `value`: an exclusive grant of its own (no
  // reentrancy), one count on a hold that only the caller knows. nullptr when the wait
  // ran out or was cancelled. Throws Error (invalid_argument for a value too long,
  // unsupported, engine errors).
  std::shared_ptr<Hold> campaign(const core::LockKey& key, std::string value,
                                 const LockOptions& options, Clock::time_point deadline,
                                 std::stop_token stop);

  // The request of `permits` of the semaphore `key` of `capacity` permits, checked as
  // acquire_permits checks it (throws the same errors).
  core::AcquireRequest permits_request(const core::LockKey& key, std::uint32_t capacity,
                                       std::uint32_t permits, const LockOptions& options,
                                       Clock::time_point deadline, std::stop_token stop) const;

  // The request of a campaign for (key) with `value`, checked as campaign checks it
  // (throws the same errors).
  core::AcquireRequest campaign_request(const core::LockKey& key, std::string value,
                                        const LockOptions& options, Clock::time_point deadline,
                                        std::stop_token stop) const;

  // An asynchronous acquire (warden/async.h): one grant of its own, a lock's, a
  // semaphore's (request.capacity > 0) or a campaign's (request.value), checked
  // beforehand by the caller. Never counted on a thread's hold and never cached. Its
  // outcome goes to `done` exactly once, on `executor` (the completion thread when empty),
  // a grant as a Lease that keeps `self` (this ClientState) alive. Returns the operation
  // for the caller's AcquireHandle. Throws Error(invalid_argument) for an empty `done`,
  // before anything is asked; nothing else.
  std::shared_ptr<AsyncAcquire> grant_async(const std::shared_ptr<ClientState>& self,
                                            core::AcquireRequest request, AcquireCallback done,
                                            Executor executor);
  // Runs work on the Client's completion thread (where asynchronous outcomes go by default).
  Executor completion_executor();

  // Acquires every member of a multi-lock in one step on the engine (its capabilities
  // say atomic_multi) for the calling thread, which must hold none of them: one new hold
  // per member, in member order, each registered as acquire() registers it. Empty when
  // the wait ran out or was cancelled. Throws Error (unsupported, engine errors).
  std::vector<std::shared_ptr<Hold>> acquire_set(
      const std::vector<core::AcquireSetRequest::Member>& members, const LockOptions& options,
      Clock::time_point deadline, std::stop_token stop);

  // Releases one count of `mode` on `hold`. On the last count, releases the grant on the
  // backend, or keeps it in the lock cache (a cacheable grant not revoked). With `report`
  // (Lease::release) it waits for the backend's answer: if the backend does not confirm, the count
  // is restored and the Error rethrown. Without (unlock(), a Lease dropped) it sends the release
  // and returns; a release the backend does not confirm is retried in the background.
  void release(const std::shared_ptr<Hold>& hold, Mode mode, bool report);
  // Lease::release_async: the release sent without waiting, `done` told on `executor`
  // (the completion thread when empty) once the backend answered — its error too, after
  // which the grant is released in the background. Throws not_owner as release does.
  void release_async(const std::shared_ptr<ClientState>& self, const std::shared_ptr<Hold>& hold,
                     Mode mode, Lease::ReleaseCallback done, Executor executor);

  // The calling thread's hold of `key`, or nullptr.
  std::shared_ptr<Hold> find(const core::LockKey& key) const;

  bool check(const Sequencer& sequencer);

  // This client sees its own releases at once: a try, a check, an inspect or a list that
  // could read a lock whose release this client sent without waiting first waits for the
  // answers still due (docs/contract.md). settle_release_of waits only if `key` has one.
  void settle_release_of(const core::LockKey& key);
  void settle_releases();

  // The engine, for calls that need nothing of the client's own state (status).
  core::Engine& engine() const { return *engine_; }

  // Constant after construction.
  const std::string uri;
  const ClientOptions options;
  const Capabilities capabilities;
  const std::shared_ptr<core::Metrics> metrics;

 private:
  using HoldKey = std::pair<ThreadKey, std::string>;  // (thread, "group/name")
  void forget(const Hold& hold);
  // One grant from the engine, with metrics: a new hold with one count of the request's
  // mode, not yet known to holds_ or the watchdog. nullptr for a wait that ran out.
  std::shared_ptr<Hold> grant(core::AcquireRequest request);
  // A hold registered for the calling thread (holds_) and watched.
  void register_hold(const std::shared_ptr<Hold>& hold);
  // Removes one count of `mode` from `hold`: true when the grant itself is to go now (the
  // hold's last count, still held). Otherwise does what a count that is not the last, or
  // one of a hold already lost, needs. Throws not_owner if there was no such count.
  bool remove_count(const std::shared_ptr<Hold>& hold, Mode mode);
  // The last count of `hold` is gone: its release is sent without waiting (engine
  // release_async), counted in releasing_ until the backend answers; `then` (if any) is
  // called with the answer after the client has taken note of it.
  void release_without_waiting(const std::shared_ptr<Hold>& hold,
                               std::function<void(std::exception_ptr)> then = {});
  // The backend answered the release of `hold`, sent at `released_at`.
  void released(const std::shared_ptr<Hold>& hold, Clock::time_point released_at,
                const std::exception_ptr& error);

  // Lock caching (core/lock_cache.h).
  // A hold for the calling thread on the cached grant `parked`, registered and watched in
  // its place; nullptr if that grant was lost meanwhile.
  std::shared_ptr<Hold> unpark(const std::shared_ptr<Hold>& parked, Mode mode);
  // Moves the grant of `hold` (its last count just removed) into the cache; false, and
  // nothing changes, if its grant was revoked and must really be released.
  bool park(const std::shared_ptr<Hold>& hold);
  // Releases cached grants on the backend, without waiting.
  void give_back(core::LockCache::Holds holds);
  // The grant of `hold` ended: a watch for its revokes is no longer needed.
  void unwatch_revokes(const Hold& hold);
  void on_revoke(const core::Revoke& revoke);

  const std::shared_ptr<core::Engine> engine_;
  core::Watchdog watchdog_;
  // Destroyed before the engine: it runs the outcomes still queued.
  core::CompletionThread completions_;

  mutable std::mutex mu_;
  std::map<HoldKey, std::shared_ptr<Hold>> holds_;  // guarded by mu_
  // "group/name" → releases sent without waiting and not yet answered. guarded by mu_
  std::map<std::string, int> releasing_;
  // Last: its sweeper gives back through this client, so it stops first.
  core::LockCache cache_;
  // Revokes by watching, for an engine that caches but does not report revokes itself.
  const bool revokes_by_watching_;
  // Guards watch_revokes_, which the destructor empties while releases answered on
  // engine threads may still stop watches (unwatch_revokes).
  std::mutex revokes_mu_;
  std::unique_ptr<core::WatchRevokes> watch_revokes_;  // guarded by revokes_mu_
};

}  // namespace warden::detail
