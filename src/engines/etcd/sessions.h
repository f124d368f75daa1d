// engines/etcd/sessions.h — the leases a Client's lock keys are attached to, and the
// thread that keeps them alive (etcd's concurrency.Session, per TTL).
//
// With the watchdog on, every request with the same TTL shares one session lease,
// kept alive every TTL/3 over the LeaseKeepAlive stream for as long as the Client
// uses it; a session idle for kIdleLinger is revoked. With the watchdog off, each
// request gets a lease of its own, kept alive only while the request waits: once
// granted, the lease runs out by its TTL unless released first, as the contract says.
// layout=concurrency names a request's key after its lease (NAME/LEASE), so one lease
// can carry only one request per lock: begin() with `named_under` hands out the session
// while no other live request of the Client has that key, and otherwise a lease of the
// request's own, kept alive like a session's while the request waits or holds and
// revoked when it ends. A name stays taken until its key is known to be gone (deleted,
// or its lease lost), as RequestSlots does for layout=warden.
//
// A lease's length on the server is the TTL rounded up to whole seconds (or the
// server's minimum, if more); the local expiry counts only the TTL asked for, from
// the send time of the last answered keep-alive, so the client always gives a lock up
// before the server could.
//
// When the server says a lease is gone (expired during a partition, revoked by
// someone else), the session is lost: every grant attached to it is reported to
// `on_lost`, and new requests get a new session.
//
// Withdrawals that could not be confirmed (the cluster was unreachable when a wait was
// cancelled) are retried by the keeper thread until they succeed or the lease is gone.
//
// A grant the core declared lost on its own (its local expiry passed: renewals failed
// for a while, or the watchdog is off) is never released by the core; its key would
// stay on a session that lives on. The keeper deletes such a key, guarded by its
// create_revision, once the last expiry told to the core has passed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/engine.h"
#include "engines/etcd/etcd_rpc.h"

namespace warden::engines::etcd {

inline constexpr std::chrono::seconds kIdleLinger{10};

struct Session {
  std::int64_t lease = 0;
  std::chrono::milliseconds ttl{0};
  bool shared = true;  // false: one request's own lease
  // Kept alive while it has holders, not only waiters: every shared session, and an own
  // lease asked for with the watchdog on.
  bool kept = true;
};

class Sessions {
 public:
  using LostSink = std::function<void(const core::GrantRef&)>;
  Sessions(std::shared_ptr<EtcdRpc> rpc, const EtcdConfig& config, LostSink on_lost);
  ~Sessions();  // stops the keeper; revokes the leases if the cluster was reachable
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  // A session for a new request with `ttl`, counted as waiting until granted() or
  // withdrawn(). Grants a lease when needed; throws Error if that fails.
  // `named_under` (layout=concurrency): the request's key will be named_under +
  // lease_hex(lease). The shared session is returned if that key is not taken by another
  // request of this Client (it is now taken, until withdrawn() or released() confirm it
  // gone, or the session is lost); otherwise a new lease for this request alone (shared
  // is false; kept alive while it holds if the watchdog is on).
  std::shared_ptr<const Session> begin(std::chrono::milliseconds ttl,
                                       const std::string& named_under = {});
  // begin() without blocking, for a request of the shared session's (the watchdog on, no
  // key named after the lease): the live session for `ttl`, counted as waiting; null when
  // there is none (begin() grants one).
  std::shared_ptr<const Session> join(std::chrono::milliseconds ttl);
  // The request on `session` was granted as `grant`, reported to the core with local
  // expiry `expires`. false if the session was lost meanwhile (the key is gone with it).
  bool granted(const Session& session, const std::string& key, const core::GrantRef& grant,
               Clock::time_point expires);
  // A renewal is about to tell the core that the grant with `key` expires at
  // `expires`. `gone` if the grant was dropped meanwhile (see above): the renewal must
  // report it lost instead. `stale` if `expires` is no later than what the core already
  // knows — the keeper has not confirmed the lease since (a member froze and it is failing
  // over): the renewal is undecided, so the core asks again soon instead of a whole
  // interval later, when the lease may have lapsed locally.
  enum class Renewal { advanced, stale, gone };
  Renewal renewed(std::int64_t lease, const std::string& key, Clock::time_point expires);
  // The lease is gone on the server (a put on it found no lease, or a waiter's key
  // vanished): its grants are reported lost and new requests get a new session.
  void lose(std::int64_t lease);
  // The request on `session` ended without a grant. `key`, if not empty, is deleted
  // now (within `until`: past it, the keeper deletes it without the caller waiting),
  // and again later until confirmed if the cluster cannot be reached. true if the key is
  // known to be gone now (deleted, or empty: gone with a lost session).
  bool withdrawn(const std::shared_ptr<const Session>& session, const std::string& key,
                 Clock::time_point until = Clock::time_point::max());
  // A grant on `session` was released (its key deleted): an own lease is revoked; a
  // shared session's key name is free again.
  void released(std::int64_t lease, const std::string& key);
  // A release of the grant with `key` on `lease` is under way: a begin() that would
  // name its key so waits for released() or release_failed() (up to op_timeout) instead
  // of granting a lease of its own.
  void releasing(std::int64_t lease, const std::string& key);
  // That release ended without released() (its delete failed, or it was refused): the
  // grant is still held. Nothing if released() came first.
  void release_failed(std::int64_t lease, const std::string& key);
  // Whether `key` is a grant this Client holds on `lease` (granted, not yet released,
  // dropped or lost).
  bool holds(std::int64_t lease, const std::string& key) const;

  // The session's conservative local expiry; nullopt once it is lost or unknown.
  std::optional<Clock::time_point> expires(std::int64_t lease) const;

 private:
  void keeper_loop(std::stop_token stop);
  void keep_alive_due(std::unique_lock<std::mutex>& lock);
  // Both end at once when `stop` is requested (the Client closes).
  void retry_withdrawals(std::unique_lock<std::mutex>& lock, const std::stop_token& stop);
  void revoke_idle(std::unique_lock<std::mutex>& lock, const std::stop_token& stop);
  void drop_overdue(std::unique_lock<std::mutex>& lock);
  void lose_locked(std::unique_lock<std::mutex>& lock, std::int64_t lease);
  // Deletes `key` (only if its create_revision is `revision`, when that is not 0).
  void delete_key(const std::string& key, std::int64_t revision, const EtcdRpc::Bound& bound = {});
  // `key`, named after `lease`, is known to be gone: its name may be taken again.
  void unname_locked(std::int64_t lease, const std::string& key);

  const std::shared_ptr<EtcdRpc> rpc_;
  const EtcdConfig config_;
  const LostSink on_lost_;

  struct Holding {
    core::GrantRef grant;
    Clock::time_point reported;  // the local expiry the core knows
  };
  struct Entry {
    std::shared_ptr<Session> session;
    Clock::time_point expires;
    Clock::time_point next_keep_alive;
    int waiters = 0;
    std::map<std::string, Holding> holders;  // by etcd key
    // layout=concurrency: the keys named after this lease that exist or may exist (a live
    // request's, or one whose delete is not confirmed yet).
    std::set<std::string> named;
    std::set<std::string> releasing;  // holders whose release is under way
    Clock::time_point idle_since;
  };
  struct Withdrawal {
    std::string key;
    std::int64_t revision = 0;  // guard for the delete; 0: none (a waiter's own key)
    std::int64_t lease = 0;
    bool revoke = false;        // an own lease: revoke it (that deletes the key)
    Clock::time_point give_up;  // an own lease has surely ended by then
  };

  mutable std::mutex mu_;
  std::condition_variable_any wake_;
  std::condition_variable names_freed_;    // a key left `named` or `releasing`, or a session lost
  std::map<std::int64_t, Entry> entries_;  // by lease id; guarded by mu_
  std::map<std::chrono::milliseconds, std::int64_t> by_ttl_;  // shared sessions; guarded by mu_
  std::vector<Withdrawal> withdrawals_;                       // guarded by mu_
  bool reachable_ = true;      // last keep-alive round; guarded by mu_
  std::uint64_t changes_ = 0;  // counts new sessions, to wake the keeper; guarded by mu_
  std::jthread keeper_;        // last: starts after the rest exists
};

}  // namespace warden::engines::etcd
