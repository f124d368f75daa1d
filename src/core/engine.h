// core/engine.h — the internal interface every backend implements.
//
// Engines are thin adapters over a backend's protocol. They never see reentrancy,
// the watchdog or metrics: the core calls acquire once per backend grant, renews
// grants in batches, releases each grant once (retrying on failure) and asks check.
// Every engine translates its backend's errors into warden::Error in one place.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "warden/error.h"
#include "warden/options.h"
#include "warden/sequencer.h"
#include "warden/status.h"
#include "warden/types.h"

namespace warden::core {

// A validated lock identity.
struct LockKey {
  std::string group;
  std::string name;
  // "group/name": unambiguous because a group cannot hold '/'.
  std::string joined() const { return group + '/' + name; }
  friend bool operator==(const LockKey&, const LockKey&) = default;
};

// One grant held on the backend.
struct GrantRef {
  LockKey key;
  Mode mode = Mode::exclusive;
  std::uint64_t token = 0;
  std::chrono::milliseconds ttl{0};  // lease length to renew for
  std::string owner;                 // engine-defined identity of the grant (may be empty)
  std::uint32_t permits = 0;         // a semaphore's grant: the permits it holds; else 0
};

struct AcquireRequest {
  LockKey key;
  Mode mode = Mode::exclusive;
  LockOptions options;         // validated against capabilities(); fairness is fifo or
                               // non_fair, never automatic (the core resolves it)
  Clock::time_point deadline;  // min(): try once; max(): forever
  std::stop_token stop;        // cancels a wait
  // A semaphore's request when capacity > 0 (only to an engine whose capabilities say
  // `semaphore`): `permits` of the semaphore's `capacity`, 1 <= permits <= capacity, mode
  // shared. The engine refuses a capacity other than the one the semaphore has on the
  // backend with Error(invalid_argument), and changes nothing.
  std::uint32_t capacity = 0;
  std::uint32_t permits = 0;
  // An election's campaign (only to an engine whose capabilities say `election`): the
  // candidate's value, stored with the request and its grant, shown by inspect as the
  // holder's value. Mode exclusive, no permits. Empty for a lock's request.
  std::string value{};
};

// A multi-lock's members, granted in one step on the backend (only to an engine whose
// capabilities say `atomic_multi`): all of them, or none. Members are distinct locks in
// the core's sorted order; the options, deadline and stop are the whole request's.
struct AcquireSetRequest {
  struct Member {
    LockKey key;
    Mode mode = Mode::exclusive;
  };
  std::vector<Member> members;
  LockOptions options;  // fairness resolved, as for AcquireRequest
  Clock::time_point deadline;
  std::stop_token stop;
};

struct Granted {
  GrantRef grant;
  // Conservative local expiry: no later than the moment the backend could hand the
  // lock to someone else, on this process's monotonic clock (e.g. the send time of
  // the request that created or last renewed the grant, plus its TTL).
  Clock::time_point expires;
  // Lock caching: the backend will tell this client (Engine::report_revoke) when another
  // asks for this grant's lock, so the client may keep the grant after its release. Set
  // only for a request with options.cache; false when the engine could not arrange it
  // (then the grant is released as usual).
  bool cacheable = false;
};

// The backend asks a caching client for a grant back (Engine::set_revoke_sink): the
// grant of `key` with `token`, or, with `everything`, every grant the client caches or
// holds with caching (the engine may have missed revokes, e.g. its listener reconnected).
struct Revoke {
  LockKey key;
  std::uint64_t token = 0;
  bool everything = false;
};

// Per grant, the result of a renewal in a batch.
struct Renewed {
  // The new conservative local expiry; nullopt when the backend says it no longer
  // holds the grant (the lease is lost).
  std::optional<Clock::time_point> expires;
  // Neither: the backend could not decide this grant's renewal (Redlock: too few masters
  // answered to count a quorum either way). The old expiry stands and the core retries
  // soon, as after a failed batch, for this grant alone.
  bool undecided = false;

  static Renewed until(Clock::time_point expires) { return Renewed{expires, false}; }
  static Renewed lost() { return Renewed{std::nullopt, false}; }
  static Renewed unknown() { return Renewed{std::nullopt, true}; }
};

// A subscription to the changes of one lock's holders and their values on the backend
// (Engine::watch), for Election::observe: it says *that* something changed, and the
// caller reads what. Used by one thread at a time.
class KeyWatch {
 public:
  virtual ~KeyWatch() = default;
  // Blocks until a change signalled after the watch began (or after the previous wait
  // returned true), until `until`, or until `stop` is requested. true if a change was
  // signalled; false otherwise, also when the watch broke (then broken() is true and it
  // will signal nothing more: the caller opens another). A signal may be spurious, and
  // several changes may be signalled once.
  virtual bool wait(Clock::time_point until, const std::stop_token& stop) = 0;
  virtual bool broken() const = 0;
  // false for a watch that signals only some changes (redis://: a lease that runs out
  // publishes nothing): the caller then also looks at its usual poll.
  virtual bool complete() const { return true; }
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual Capabilities capabilities() const = 0;

  // Acquires one grant. Blocks until granted, until request.deadline passes, or until
  // request.stop is requested. Returns nullopt for a timed-out or cancelled wait, which
  // leaves no trace on the backend. Throws Error (unavailable, deadline_exceeded,
  // permission_denied, resource_exhausted, ...).
  virtual std::optional<Granted> acquire(const AcquireRequest& request) = 0;

  // The same acquire, without blocking the caller: `done` is called exactly once, on any
  // thread (also this one, before acquire_async returns), with what acquire() would have
  // returned — the grant, or nullopt for a wait that ran out or was cancelled through
  // request.stop (leaving no trace) — or with the Error it would have thrown (then the
  // optional is empty). `done` must not block long: it runs on an engine thread. An
  // engine that waits without a thread says so (waits_without_threads); this default
  // waits in acquire() on a thread of its own per request.
  using AcquireDone = std::function<void(std::optional<Granted>, std::exception_ptr)>;
  virtual void acquire_async(AcquireRequest request, AcquireDone done);
  virtual bool waits_without_threads() const { return false; }

  // Acquires every member of `request` in one step: one grant per member, in member
  // order, or nullopt for a timed-out or cancelled wait, which holds nothing meanwhile
  // and leaves no trace. Throws like acquire. Throws Error(unsupported) before any I/O
  // for a set it cannot take in one step (the default: the engine's capabilities lack
  // atomic_multi; or this set is too large for one request): the core then takes the
  // members one by one.
  virtual std::optional<std::vector<Granted>> acquire_set(const AcquireSetRequest& /*request*/) {
    throw Error(Errc::unsupported, "this engine cannot grant several locks in one step");
  }

  // Renews every grant for its ttl; one result per grant, in order. Throws Error when
  // the batch as a whole could not be sent or answered (the core keeps the old expiries
  // and retries next round).
  virtual std::vector<Renewed> renew(std::span<const GrantRef> grants) = 0;

  // Releases one grant. Idempotent: a grant the backend no longer holds counts as
  // released. Throws Error (unavailable, deadline_exceeded) if not confirmed.
  virtual void release(const GrantRef& grant) = 0;

  // Releases one grant without waiting for the backend's answer, where the engine can
  // (this default releases at once, as release() does, then calls `done`). `done` is
  // called exactly once, on any thread: with nullptr once the backend confirmed the
  // release (a grant it no longer held counts as released), or with the Error that left
  // it unconfirmed. A request sent after this returns may reach the backend before the
  // release does: the core sends a try of the same lock only after settle_releases().
  using ReleaseDone = std::function<void(std::exception_ptr)>;
  virtual void release_async(const GrantRef& grant, ReleaseDone done) {
    try {
      release(grant);
    } catch (...) {
      done(std::current_exception());
      return;
    }
    done(nullptr);
  }
  // Returns once every release_async sent before this call has called its `done`
  // (each bounded by the engine's op_timeout).
  virtual void settle_releases() {}

  // Replaces the value an election's grant carries (see AcquireRequest::value). false if
  // the backend no longer holds the grant (nothing changes). Throws Error (unavailable,
  // deadline_exceeded); the default throws unsupported.
  virtual bool proclaim(const GrantRef& /*grant*/, std::string_view /*value*/) {
    throw Error(Errc::unsupported, "this engine has no elections");
  }
  // Starts watching `key`: every change of its holders or of their values after this
  // call returns (a grant, a release, an expiry, a proclaim) is signalled by the watch.
  // nullptr for an engine that cannot watch (the default; capabilities().watch says).
  // Throws Error (unavailable, deadline_exceeded, permission_denied).
  virtual std::unique_ptr<KeyWatch> watch(const LockKey& /*key*/) { return nullptr; }
  // Lock caching's watch (core/watch_revokes.h): signals when another client asks for
  // `key` after this call returns, whether it then waits or gives up at once. A signal may
  // be spurious (each costs a cached grant); one that broke is opened again. The default
  // is watch(): any change of the lock's requests is another client's.
  virtual std::unique_ptr<KeyWatch> watch_requests(const LockKey& key) { return watch(key); }
  // true iff the backend still holds the grant `sequencer` names.
  virtual bool check(const Sequencer& sequencer) = 0;

  // What the backend says about one lock now: holders, waiters in queue order, a
  // running lock-delay (warden/status.h). One read, no waiting; never changes the lock.
  // Throws Error (unavailable, deadline_exceeded, permission_denied); the default
  // throws unsupported, for an engine that cannot be asked.
  virtual LockStatus inspect(const LockKey& /*key*/) {
    throw Error(Errc::unsupported, "this engine cannot show a lock's status");
  }

  // Every lock of `group` the backend knows now (held, waited for, or delaying), with
  // its holder and waiter counts, sorted by name (bytewise). Reads the backend's key
  // space page by page (no single huge reply); blocks for as many round trips as that
  // takes. Throws like inspect.
  virtual std::vector<LockSummary> list(std::string_view /*group*/) {
    throw Error(Errc::unsupported, "this engine cannot list a group's locks");
  }

  // Engines that learn of lost grants asynchronously (a session expired) report them
  // through this sink; the core then fires the lost signal at once. Set once, before
  // the first acquire; may be called from any engine thread.
  using LossSink = std::function<void(const GrantRef&)>;
  void set_loss_sink(LossSink sink) { loss_sink_ = std::move(sink); }

  // Engines that offer lock caching (capabilities().cache) report revokes through this
  // sink, from any engine thread. Setting it waits for a call in progress, so after
  // set_revoke_sink(nullptr) returns the old sink is never called again.
  using RevokeSink = std::function<void(const Revoke&)>;
  // true if the engine reports revokes itself (warden://: the server pushes them), and
  // sets Granted::cacheable. false with capabilities().cache: the core learns of requests
  // by watching the lock (watch() and inspect(), core/watch_revokes.h), and every grant
  // asked with options.cache is cacheable.
  virtual bool reports_revokes() const { return false; }
  void set_revoke_sink(RevokeSink sink) {
    std::lock_guard guard(revoke_mu_);
    revoke_sink_ = std::move(sink);
  }

 protected:
  void report_lost(const GrantRef& grant) const {
    if (loss_sink_) loss_sink_(grant);
  }
  void report_revoke(const Revoke& revoke) const {
    std::lock_guard guard(revoke_mu_);
    if (revoke_sink_) revoke_sink_(revoke);
  }

 private:
  LossSink loss_sink_;
  mutable std::mutex revoke_mu_;
  RevokeSink revoke_sink_;  // guarded by revoke_mu_
};

}  // namespace warden::core
