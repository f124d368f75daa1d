// engines/redis/async_waits.h — the asynchronous acquires of a redis:// engine on one
// server (or Sentinel's master): every one driven by one thread on one connection of its
// own, however many wait.
//
// A wait is the blocking acquire's loop (redis_engine.cc) turned inside out: its attempt
// (acquire.lua) is written on the connection and its answer read when it comes, in the
// order written; a wait not granted watches its lock's channel on the Client's
// subscriber and looks again when a message names it, when its subscription is
// (re)confirmed, or at its next poll, whichever comes first. A wait that runs out or is
// cancelled withdraws (withdraw.lua, which also gives back a grant made for it whose
// answer had not arrived) and is told when the withdraw is answered.
//
// A connection that closes under a request (CLIENT KILL) makes its wait give back what
// that request may have done (its answer lost: a grant, an entry) and ask again at once
// on a new one, as a blocking wait whose line failed does: at the queue's tail, the
// waits that lost a request together in the order they were first asked. A request unanswered
// within op_timeout breaks the connection (a frozen server, a partition): every wait
// with a request on it is told as the blocking acquire would be — a cancelled or run-out
// one nothing, the others the error, or (behind Sentinel) asked again on a new
// connection within their wait; an error reply is decided the same way. An entry or
// grant nobody could withdraw lapses by its own TTL.
//
// Outcomes are told on the thread and must not block it. stop() ends the thread; the
// engine calls it first in its destructor, also from a callback on the thread itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/engine.h"
#include "core/wait_inbox.h"
#include "core/wait_timers.h"
#include "engines/redis/acquire_plan.h"
#include "engines/redis/subscriber.h"
#include "engines/resp_client/connection.h"
#include "engines/resp_client/connector.h"
#include "engines/resp_client/script.h"

namespace warden::engines::redis {

class AsyncWaits : public std::enable_shared_from_this<AsyncWaits> {
 public:
  struct Setup {
    std::shared_ptr<resp_client::Connector> connector;
    std::chrono::milliseconds op_timeout{};
    RetryPolicy poll;               // between looks of a wait nothing woke
    bool follows_failover = false;  // behind Sentinel: a failed wait asks again
    // With min_replicas: the WAIT sent behind a grant (empty without), and how many
    // replicas must have it, else it is given back as the blocking acquire's is.
    resp_client::Command replicas_wait;
    std::int64_t min_replicas = 0;
    std::chrono::milliseconds replica_timeout{};
    // Told each grant before its wait is (the engine's record for failovers).
    std::function<void(const core::GrantRef&)> granted;
  };

  // Starts the thread (it connects when the first acquire comes).
  static std::shared_ptr<AsyncWaits> start(Setup setup);
  ~AsyncWaits();
  AsyncWaits(const AsyncWaits&) = delete;
  AsyncWaits& operator=(const AsyncWaits&) = delete;

  // Engine::acquire_async's contract: `done` is called once, on the thread. The wait
  // watches its lock on `subscriber`, which it keeps alive while it does.
  void acquire(core::AcquireRequest request, AcquirePlan plan,
               std::shared_ptr<Subscriber> subscriber, core::Engine::AcquireDone done);

  // Ends the thread; waits for it unless called on it. Waits still pending are told
  // Error(unavailable); nothing is called after stop() returns.
  void stop();

 private:
  struct Wait;
  using Waits = std::unordered_map<std::uint64_t, std::unique_ptr<Wait>>;
  // What a request on the wire was, for the reply that answers it.
  enum class Sent { attempt, withdraw, forget, replicas };
  struct OnWire {
    std::uint64_t id;
    Sent what;
    Clock::time_point at;
  };

  explicit AsyncWaits(Setup setup);

  void run();
  // One turn: takes what arrived, was cancelled or woken, fires what is due, reads
  // what came. Throws Error when the connection fails (see run()).
  void turn();
  void attempt(Wait& w, Clock::time_point now);
  void withdraw(Wait& w, Clock::time_point now);
  // Sends one request for `w` (or, with Sent::forget, one whose answer nobody reads,
  // which the callers send in full: see send()).
  // false if no connection could be had: `w` has been told or rescheduled then.
  bool send(Wait& w, const resp_client::ScriptCall& call, Sent what, bool by_sha,
            Clock::time_point now);
  void answered(const OnWire& request, const resp_client::Reply& reply);
  void attempt_answered(Waits::iterator it, const resp_client::Reply& reply,
                        Clock::time_point sent);
  // Sends the WAIT behind `w`'s grant, on the connection that wrote it.
  void send_replicas_wait(Wait& w, Clock::time_point now);
  // The WAIT behind `w`'s grant was answered: granted, or given back (min_replicas).
  void replicas_answered(Waits::iterator it, const resp_client::Reply& reply);
  void grant(Waits::iterator it, std::uint64_t token, Clock::time_point sent);
  // The request on the wire for `w` failed with `why` (the connection broke).
  void failed(Waits::iterator it, const Error& why);
  void sleep(Wait& w, Clock::time_point now, std::int64_t retry_ms);
  void fire(Wait& w, Clock::time_point now);
  void stopped(std::uint64_t id, Clock::time_point now);
  void woken(std::uint64_t id, Clock::time_point now);
  void tell(Waits::iterator it, std::optional<core::Granted> granted, std::exception_ptr error);
  // The connection broke: every request on it fails with `why`.
  void fail_on_wire(const Error& why);
  void schedule(Wait& w, std::optional<Clock::time_point> at);
  std::string context(std::string_view what) const;

  const Setup setup_;
  core::WaitInbox<Wait> inbox_;  // before the waits, whose stop callbacks use it

  // The thread's own.
  std::unique_ptr<resp_client::Connection> conn_;
  std::deque<OnWire> on_wire_;  // requests written, in order, not yet answered
  Waits waits_;
  core::WaitTimers timers_;
};

}  // namespace warden::engines::redis
