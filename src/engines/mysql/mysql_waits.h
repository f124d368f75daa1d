// engines/mysql/mysql_waits.h — the asynchronous acquires of a mysql:// engine (locks
// and campaigns): one thread waits on all of their sessions with poll(), however many
// wait.
//
// GET_LOCK waits on the session that asks, so each wait takes one: an idle one from the
// engine's pool, or a new one, logged in without blocking (libmariadb's non-blocking
// API). On it the wait sends what the blocking acquire sends — the registry row of a lock
// used for the first time, the grant statement, and after a grant now and then the
// round trip that makes tokens durable — and reads each answer as it comes. Sessions log
// in side by side, but a wait sends its grant only after every wait begun before it has
// sent its own, so that waits reach the server's queue in the order they were asked.
// The pool bounds the sessions a client opens (`pool=N`): a wait that finds every one in
// use queues in the client, in the order asked, until one frees (a try never queues: it
// ends at once as the blocking try does).
//
// A cancelled wait has its statement ended by KILL QUERY (sent by the engine's
// QueryKiller, not waited for); its reply then frees what the session may hold
// (RELEASE_ALL_LOCKS) before it is told, so it leaves nothing queued. A statement
// unanswered by its bound (a timed wait's deadline plus op_timeout, op_timeout after a
// cancel, op_timeout for a round trip that does not wait) closes its session, which frees
// whatever it took once the server sees it.
//
// Outcomes are told on the thread and must not block it. stop() ends the thread; the
// engine calls it first in its destructor, also from a callback on the thread itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/engine.h"
#include "core/wait_inbox.h"
#include "core/wait_sessions.h"
#include "core/wait_timers.h"
#include "engines/mysql/connection.h"
#include "engines/mysql/pool.h"
#include "engines/mysql/query_killer.h"

namespace warden::engines::mysql {

class MysqlWaits : public std::enable_shared_from_this<MysqlWaits> {
 public:
  // What the engine lends its waits; called on the thread only, never after stop().
  struct Host {
    Pool* pool = nullptr;
    QueryKiller* killer = nullptr;
    // The registry id of a lock the engine knows already, and one a wait learnt.
    std::function<std::optional<std::uint64_t>(const core::LockKey&)> known_id;
    std::function<void(const core::LockKey&, std::uint64_t)> learnt_id;
    // The grant statement for `request` of lock `id`, on a session whose wait_timeout is
    // `session_idle` (the statement sets the TTL's when it differs).
    std::function<std::string(const core::AcquireRequest&, std::uint64_t id,
                              std::chrono::seconds session_idle)>
        grant_sql;
    // The wait_timeout a session holding a lease of `ttl` has (the grant statement sets it).
    std::chrono::seconds (*idle_for)(std::chrono::milliseconds ttl) = nullptr;
    // The round trip that makes `token` durable before it is told, or nullopt when it is
    // already; and what its reply says (throws Error when it cannot vouch for it).
    std::function<std::optional<std::string>(std::uint64_t token)> durable_sql;
    std::function<void(const std::vector<ResultSet>&, std::uint64_t token)> durable_answer;
    // Makes `token` on `connection` a grant of the engine, its lease counted from `send`.
    std::function<core::Granted(const core::AcquireRequest&, std::unique_ptr<Connection>,
                                std::uint64_t id, std::uint64_t token, Clock::time_point send)>
        hold;
  };

  static std::shared_ptr<MysqlWaits> start(Host host);
  ~MysqlWaits();
  MysqlWaits(const MysqlWaits&) = delete;
  MysqlWaits& operator=(const MysqlWaits&) = delete;

  // Engine::acquire_async's contract for a lock's or a campaign's request: `done` is
  // called once, on the thread.
  void acquire(core::AcquireRequest request, core::Engine::AcquireDone done);

  // Ends the thread; waits for it unless called on it. Waits still pending are told
  // Error(unavailable) and their sessions closed; nothing is called after stop() returns.
  void stop();

 private:
  struct Wait;
  using Waits = std::unordered_map<std::uint64_t, std::unique_ptr<Wait>>;

  explicit MysqlWaits(Host host);

  void run();
  void turn();
  // Gives queued waits the sessions free now, in the order asked.
  void admit(Clock::time_point now);
  // A session for `it`: false when none is free (it stays queued).
  bool begin(Waits::iterator it, Clock::time_point now);
  void connected(Waits::iterator it, Clock::time_point now);
  void ready(Wait& w, Clock::time_point now);
  // Sends the grants of the waits ready for them, in the order they began.
  void ask_in_order(Clock::time_point now);
  void ask(Waits::iterator it, Clock::time_point now);
  // Sends w.sql; `waits`: the grant itself (bounded by the deadline, ended by a cancel).
  void send(Waits::iterator it, bool waits, Clock::time_point now);
  void progress(Waits::iterator it, int ready, Clock::time_point now);
  void answered(Waits::iterator it, Clock::time_point now);
  void granted_answer(Waits::iterator it, const std::vector<ResultSet>& sets,
                      Clock::time_point now);
  void withdraw(Waits::iterator it, Clock::time_point now);
  void fire(Waits::iterator it, Clock::time_point now);
  void stopped(std::uint64_t id, Clock::time_point now);
  // Hands the session back (usable) or closes it, and tells the wait.
  void tell(Waits::iterator it, std::optional<core::Granted> granted, std::exception_ptr error,
            bool keep_session = false);
  void schedule(Wait& w, Clock::time_point now);

  const Host host_;
  core::WaitInbox<Wait> inbox_;  // before the waits, whose stop callbacks use it

  // The thread's own.
  Waits waits_;
  core::SessionLine line_;  // waits without a session yet
  core::AskOrder asks_;     // waits with a session, not yet asked
  core::WaitTimers timers_;
};

}  // namespace warden::engines::mysql
