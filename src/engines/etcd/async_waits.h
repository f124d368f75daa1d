// engines/etcd/async_waits.h — the asynchronous acquires of an etcd:// engine: every one
// driven by one thread of the Client's, however many wait.
//
// A wait is the blocking acquire (etcd_engine.cc) turned inside out, by the same Txns
// (request_txns.h) sent on gRPC's asynchronous API with the same failover
// (EtcdRpc::txn_async): its key is created on the Client's session, then a look reads its
// key and what blocks it; a blocked wait watches that deletion on the Client's one watch
// stream (watch_hub.h) and sleeps until the watch fires, its next poll, its deadline or
// its cancel. A fired watch makes it look again; a poll reads only its key and the one it
// watches (the look's blocker read sorts the whole queue in etcd) and looks again only
// once that key is gone. Polls are op_timeout apart at least (the blocking wait's are
// RetryPolicy apart): the thread probes the watch stream every op_timeout / 2, and a
// stream whose member leaves a probe unanswered for op_timeout is ended, its watches
// looking again on another member. A look
// unanswered within op_timeout on every member is tried again after a pause while the wait
// has time left; a key that went with its session queues again on a new one. Answers and
// watch events come on gRPC's threads and are handed to this thread, which alone moves
// the waits on.
//
// A wait that ran out or was cancelled is told at once; its key, if it made one, is
// deleted once its call in flight has answered (a delete that fails is left to the
// session keeper, as the blocking acquire's).
//
// A session is needed before the first create. When the Client has none for the wait's
// TTL, one thread of the engine's grants it (a lease grant blocks) for every wait that
// asks, and the waits go on once it is there.
//
// Outcomes are told on the thread and must not block it. stop() ends the thread; the
// engine calls it first in its destructor.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/engine.h"
#include "core/wait_inbox.h"
#include "core/wait_timers.h"
#include "engines/etcd/etcd_config.h"
#include "engines/etcd/etcd_rpc.h"
#include "engines/etcd/lock_keys.h"
#include "engines/etcd/sessions.h"
#include "engines/etcd/watch_hub.h"

namespace warden::engines::etcd {

class AsyncWaits : public std::enable_shared_from_this<AsyncWaits> {
 public:
  // What the waits need of their engine; called on the waits' thread.
  class Host {
   public:
    virtual ~Host() = default;
    // The Client's live session for `ttl`, counted as waiting (Sessions::join); null when
    // there is none.
    virtual std::shared_ptr<const Session> join_session(std::chrono::milliseconds ttl) = 0;
    // Grants a session for `ttl` on a thread of the engine's (once, however many ask);
    // tells session_opened() when done.
    virtual void open_session(std::chrono::milliseconds ttl) = 0;
    // A key for a new request of `keys`' lock, and its slot (RequestSlots).
    virtual std::string take_key(const core::AcquireRequest& request, const LockKeys& keys,
                                 std::uint32_t& slot) = 0;
    // The grant of `key`, created at `revision`, recorded on its session; nullopt with
    // `session_lost`, as the blocking acquire's grant.
    virtual std::optional<core::Granted> grant_key(const core::AcquireRequest& request,
                                               const std::string& key, std::int64_t revision,
                                               const Session& session, bool& session_lost) = 0;
    // The session's lease is gone (Sessions::lose).
    virtual void lose(std::int64_t lease) = 0;
    // The request `key` on `session` ended without a grant: `deleted` if its delete was
    // confirmed (the slot is free again), otherwise the keeper deletes it later.
    virtual void withdrawn(const std::shared_ptr<const Session>& session, const LockKeys& keys,
                           const std::string& key, std::uint32_t slot, bool deleted) = 0;
  };

  // Starts the thread.
  // `client_id` is the Client's id, in its keys' values.
  static std::shared_ptr<AsyncWaits> start(Host& host, EtcdRpc& rpc, const EtcdConfig& config,
                                           std::string client_id);
  ~AsyncWaits();
  AsyncWaits(const AsyncWaits&) = delete;
  AsyncWaits& operator=(const AsyncWaits&) = delete;

  // Engine::acquire_async's contract: `done` is called once, on the thread. `keys` is
  // where the lock lives.
  void acquire(core::AcquireRequest request, LockKeys keys, core::Engine::AcquireDone done);

  // From the engine's session thread: the session for `ttl` was granted, or not (`error`).
  void session_opened(std::chrono::milliseconds ttl, std::exception_ptr error);

  // Ends the thread; waits for it unless called on it. Waits still pending are told
  // Error(unavailable); nothing of the host is called after stop() returns.
  void stop();

 private:
  struct Wait;
  using Waits = std::unordered_map<std::uint64_t, std::unique_ptr<Wait>>;
  // The answer of one Txn: to a wait's call (`call` its number; older ones are dropped),
  // or to a withdrawal's delete (`call` 0, `id` the withdrawal's).
  struct Answer {
    std::uint64_t id;
    std::uint64_t call;
    etcdserverpb::TxnResponse response;
    std::exception_ptr error;
  };
  // A key being deleted after its wait ended.
  struct Withdrawal {
    std::shared_ptr<const Session> session;
    LockKeys keys;
    std::string key;
    std::uint32_t slot = 0;
  };
  struct Opened {
    std::chrono::milliseconds ttl;
    std::exception_ptr error;
  };

  AsyncWaits(Host& host, EtcdRpc& rpc, const EtcdConfig& config, std::string client_id);

  void run();
  void turn();
  // Each of these may tell a wait: the caller checks inbox_.stopping() after it.
  void join(Waits::iterator it, Clock::time_point now);
  void send_create(Wait& w);
  void look(Wait& w);
  void poll(Wait& w);
  void watch(Wait& w, const std::string& key, const std::string& range_end,
             std::int64_t revision, Clock::time_point now);
  void answered(Answer answer, Clock::time_point now);
  void created(Waits::iterator it, const Answer& answer, Clock::time_point now);
  void seen(Waits::iterator it, const Answer& answer, Clock::time_point now);
  void polled(Waits::iterator it, const Answer& answer, Clock::time_point now);
  // A look or a poll failed: looks again after a pause while time is left.
  void unanswered(Waits::iterator it, const Answer& answer, Clock::time_point now);
  void try_grant(Waits::iterator it, Clock::time_point now);
  void session_lost(Waits::iterator it, Clock::time_point now);
  void opened(const Opened& opened, Clock::time_point now);
  void fire(Waits::iterator it, Clock::time_point now);
  void woken(Waits::iterator it);
  void cancelled(Waits::iterator it);

  // Sends the Txn for `id`'s call `call` (or queues it, kCallsInFlight being under way);
  // its answer reaches answered() on the thread.
  void send(std::uint64_t id, std::uint64_t call, etcdserverpb::TxnRequest txn,
            Clock::time_point until);
  // Sends what waits in outbox_ while fewer than kCallsInFlight are under way; a wait's
  // call whose wait ended meanwhile is not sent (the wait ends).
  void pump();
  // Deletes the wait's key, if it made one, and forgets the key (not the wait).
  void withdraw(Wait& w);
  // Tells the wait (once); it stays until its call in flight has answered.
  void tell(Waits::iterator it, std::optional<core::Granted> granted, std::exception_ptr error);
  // Tells it, withdraws its key and forgets it, or leaves that to its call's answer.
  void end(Waits::iterator it, std::optional<core::Granted> granted, std::exception_ptr error);
  void schedule(Wait& w, std::optional<Clock::time_point> at);
  // How long a watching wait sleeps before its next poll.
  Clock::duration poll_delay(Wait& w) const;
  // Its deadline, while a call is in flight, if that is still ahead.
  void schedule_deadline(Wait& w);
  void unwatch(Wait& w);

  Host& host_;
  EtcdRpc& rpc_;
  const EtcdConfig config_;
  const std::string client_id_;
  core::WaitInbox<Wait> inbox_;  // before the waits, whose stop callbacks use it

  // From gRPC's threads and the engine's session thread.
  std::mutex mu_;
  std::vector<Answer> answers_;  // guarded by mu_
  std::vector<Opened> opened_;   // guarded by mu_

  // The thread's own.
  Waits waits_;
  std::unordered_map<std::uint64_t, Withdrawal> withdrawals_;
  struct Outgoing {
    std::uint64_t id;
    std::uint64_t call;
    etcdserverpb::TxnRequest txn;
    Clock::time_point until;
  };
  std::deque<Outgoing> outbox_;
  int calls_in_flight_ = 0;
  std::uint64_t next_withdrawal_ = 0;
  core::WaitTimers timers_;
  Clock::time_point next_probe_;  // of the watch stream (WatchHub::probe)
  std::unique_ptr<WatchHub> hub_;  // last: its events use the above
};

}  // namespace warden::engines::etcd
