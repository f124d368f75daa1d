// engines/postgres/pg_waits.h — the asynchronous acquires of a postgres:// engine: one
// thread waits on all of their sessions with poll(), however many wait.
//
// A waiting advisory lock needs a server session of its own (PostgreSQL queues the
// session), so each wait takes one: an idle one from the engine's pool, or a new one,
// logged in without blocking (PQconnectStart). On it the wait sends what the blocking
// acquire sends (pg_acquire.h: the registry's id of a lock used for the first time, then
// the grant or permits statement, now and then one more) and reads each answer when it
// comes. Sessions log in side by side, but a wait sends its grant only after every wait
// begun before it has sent its own, so that waits reach PostgreSQL's queue in the order
// they were asked. At most `sessions` waits hold a session at once; the others queue in
// the client in the order asked and start as sessions free up (a try never queues: it
// holds its session for one round trip).
//
// A cancelled wait (or one past its deadline's backstop) has its statement cancelled on
// the server (PQcancel, on a short-lived thread of its own, since libpq's cancel blocks
// until the server answers; again every 100 ms while the statement runs) and is told
// once the server answers, so it leaves nothing queued there. A statement unanswered
// within op_timeout (after the cancel, or a round trip that does not wait) closes its
// session, which frees whatever it took once the server sees it. Any session that ended
// an acquire without a grant is closed rather than pooled, except after a try that found
// no room.
//
// Outcomes are told on the thread and must not block it. stop() ends the thread; the
// engine calls it first in its destructor, also from a callback on the thread itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/engine.h"
#include "core/wait_inbox.h"
#include "core/wait_sessions.h"
#include "core/wait_timers.h"
#include "engines/postgres/pg_acquire.h"
#include "engines/postgres/pg_config.h"
#include "engines/postgres/pg_connection.h"

namespace warden::engines::postgres {

class PgWaits : public std::enable_shared_from_this<PgWaits> {
 public:
  // What the engine lends its waits; called on the thread only, never after stop().
  struct Host {
    PgConfig config;
    const AcquireSql* sql = nullptr;  // the engine's: outlives the thread's calls
    std::size_t sessions = 1;         // waits holding a session at once, at most
    // The registry id of a lock the engine knows already, and one a wait learnt.
    std::function<std::optional<std::int64_t>(const core::LockKey&)> known_id;
    std::function<void(const core::LockKey&, std::int64_t)> learnt_id;
    // An idle pooled session, or null (never connects), and one given back.
    std::function<std::unique_ptr<PgConnection>()> idle_session;
    std::function<void(std::unique_ptr<PgConnection>)> pool;
    // Makes the grant with `token` on `conn` one of the engine's, its lease counted from
    // `from` (no later than the server started its idle clock).
    std::function<core::Granted(const core::AcquireRequest&, std::unique_ptr<PgConnection>,
                                std::int64_t token, Clock::time_point from)>
        keep;
  };

  static std::shared_ptr<PgWaits> start(Host host);
  ~PgWaits();
  PgWaits(const PgWaits&) = delete;
  PgWaits& operator=(const PgWaits&) = delete;

  // Engine::acquire_async's contract: `done` is called once, on the thread.
  void acquire(core::AcquireRequest request, core::Engine::AcquireDone done);

  // Ends the thread; waits for it unless called on it. Waits still pending are told
  // Error(unavailable) and their sessions closed; nothing is called after stop() returns.
  void stop();

 private:
  struct Wait;
  using Waits = std::unordered_map<std::uint64_t, std::unique_ptr<Wait>>;

  explicit PgWaits(Host host);

  void run();
  void turn();
  // Gives queued waits the sessions free now, in the order asked.
  void admit(Clock::time_point now);
  void begin(Waits::iterator it, Clock::time_point now);
  void connected(Waits::iterator it, Clock::time_point now);
  void look_up(Wait& w, Clock::time_point now);
  void ready(Wait& w, Clock::time_point now);
  // Sends the first statements of the waits ready for them, in the order they began:
  // sessions log in side by side, but each wait asks only after those begun before it.
  void ask_in_order(Clock::time_point now);
  void ask(Waits::iterator it, Clock::time_point now);
  void send(Wait& w, const Statement& statement, Clock::time_point now);
  // The session of `it` is ready: the login goes on, or an answer is read.
  void progress(Waits::iterator it, Clock::time_point now);
  void answered(Waits::iterator it, const Reply& reply, Clock::time_point now);
  void fire(Waits::iterator it, Clock::time_point now);
  void stopped(std::uint64_t id, Clock::time_point now);
  void tell(Waits::iterator it, std::optional<core::Granted> granted, std::exception_ptr error);
  void schedule(Wait& w, Clock::time_point now);

  const Host host_;
  core::WaitInbox<Wait> inbox_;  // before the waits, whose stop callbacks use it

  // The thread's own.
  Waits waits_;
  core::SessionLine line_;      // waits without a session yet
  core::AskOrder asks_;         // waits with a session, not yet asked
  std::size_t in_session_ = 0;  // waits holding a session
  core::WaitTimers timers_;
};

}  // namespace warden::engines::postgres
