// engines/zookeeper/async_waits.h — the asynchronous acquires of a zk:// engine: every
// one driven by one thread, on the engine's session, however many wait.
//
// A wait is the blocking acquire (zk_engine.cc) turned inside out, on the C client's
// asynchronous calls: its request node is created and the lock's children listed behind
// it in one round trip (the lock's parents first when they are missing); a request with
// an earlier one in its way sets a watch on that node (a semaphore's: on the lock's
// children) and sleeps until the watch fires, the session's state changes, its next
// poll, its deadline or its cancel, then lists again. Each answer comes on the C client's
// thread and is handed to this thread, which alone moves the waits on.
//
// Failures end as the blocking acquire's do. A call unanswered within op_timeout (a
// frozen server) or refused for a lost connection makes a wait that has its node list
// again once the session is connected, until its deadline; one that ran out or was
// cancelled meanwhile leaves its node to the engine's maintainer, which deletes it once
// ZooKeeper answers. Two things differ, both after a lost connection: a create whose
// answer was lost (the node may exist) is not looked for by its GUID, as the blocking
// acquire does, but left to the maintainer to delete and made again under a fresh GUID;
// and a wait whose node went with an expired session queues again once the engine has
// opened the next session (one thread of the engine's opens it for all: a connect
// blocks). Neither takes a thread per wait.
//
// Outcomes are told on the thread and must not block it. stop() ends the thread; the
// engine calls it first in its destructor.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/engine.h"
#include "core/wait_inbox.h"
#include "core/wait_timers.h"
#include "engines/zookeeper/lock_nodes.h"
#include "engines/zookeeper/zk_config.h"
#include "engines/zookeeper/zk_session.h"

namespace warden::engines::zookeeper {

class AsyncWaits : public std::enable_shared_from_this<AsyncWaits> {
 public:
  // What the waits need of their engine; called on the waits' thread.
  class Host {
   public:
    virtual ~Host() = default;
    // The engine's session unless it expired (null then: the wait is handed back).
    virtual std::shared_ptr<ZkSession> live_session() = 0;
    // A fresh GUID for one request node.
    virtual std::string next_guid() = 0;
    // The grant of the request node `path` (its czxid the token), whose session was
    // proved alive at `listed_at`; nullopt with `session_lost` (expired) or `suspended`
    // (suspended with on_suspend=lose), as the blocking acquire's grant.
    virtual std::optional<core::Granted> grant(const core::AcquireRequest& request,
                                               ZkSession& session, const std::string& path,
                                               std::int64_t czxid, Clock::time_point listed_at,
                                               bool& session_lost, bool& suspended) = 0;
    // Leaves a request node (by `path`, or by its `guid` under `lock`) to the maintainer.
    virtual void withdraw_later(std::int64_t session, const std::string& lock,
                                const std::string& guid, const std::string& path) = 0;
    // Opens the next session on a thread of the engine's (once, however many ask),
    // after the last expired; its "connected" reaches on_state_change().
    virtual void open_session() = 0;
  };

  // Starts the thread.
  static std::shared_ptr<AsyncWaits> start(Host& host, const ZkConfig& config,
                                           std::string client_id);
  ~AsyncWaits();
  AsyncWaits(const AsyncWaits&) = delete;
  AsyncWaits& operator=(const AsyncWaits&) = delete;

  // Engine::acquire_async's contract: `done` is called once, on the thread. `nodes` is
  // where the lock lives.
  void acquire(core::AcquireRequest request, LockNodes nodes, core::Engine::AcquireDone done);

  // From the C client's thread (the engine's SessionListener): a watched node changed;
  // the session's state changed.
  void on_node_event(const std::string& path);
  void on_state_change();

  // Ends the thread; waits for it unless called on it. Waits still pending are told
  // Error(unavailable); nothing is called after stop() returns.
  void stop();

 private:
  struct Wait;
  using Waits = std::unordered_map<std::uint64_t, std::unique_ptr<Wait>>;
  // The answer of one call, as the C client gave it: the parents' creates answer with
  // a CreateResult too; a delete with its code.
  using Result = std::variant<CreateResult, ChildrenResult, ExistsResult, int>;
  struct Answer {
    std::uint64_t id;
    std::uint64_t call;  // the wait's call it answers (older ones are dropped)
    Result result;
  };

  AsyncWaits(Host& host, const ZkConfig& config, std::string client_id);

  // Where `w`'s lock lives, made again from its key (the engine checked it could be).
  LockNodes nodes_of(const Wait& w) const;
  void run();
  void turn();
  void begin(Wait& w, Clock::time_point now);
  // Calls for `w`, each numbered; `timed` starts the op_timeout of a call in flight.
  std::uint64_t next_call(Wait& w, Clock::time_point now);
  template <class T>
  std::function<void(T)> answer_to(const Wait& w);
  void send_create(Wait& w, Clock::time_point now);
  void send_parents(Wait& w, Clock::time_point now);
  void list(Wait& w, Clock::time_point now);
  void watch(Wait& w, const RequestNode& blocker, Clock::time_point now);
  // Sets the watch on what `w` watches again, reading it (an exists, or a semaphore's
  // listing).
  void send_watch(Wait& w, Clock::time_point now);
  void withdraw(Wait& w, Clock::time_point now);
  void park(Wait& w, Clock::time_point now);
  void reconnect(Wait& w, Clock::time_point now);

  void answered(Answer answer, Clock::time_point now);
  void created(Waits::iterator it, const CreateResult& result, Clock::time_point now);
  void parent_made(Waits::iterator it, const CreateResult& result, Clock::time_point now);
  void listed(Waits::iterator it, ChildrenResult result, Clock::time_point now);
  void watched(Waits::iterator it, const Result& result, Clock::time_point now);
  void removed(Waits::iterator it, int rc);
  // The children of the lock, the wait's own node among them (or not: gone with its
  // session): grant, withdraw, or watch what is in the way.
  void decide(Waits::iterator it, std::vector<std::string> children, Clock::time_point now);
  void fire(Waits::iterator it, Clock::time_point now);
  void woken(Waits::iterator it, Clock::time_point now);
  void cancelled(Waits::iterator it, Clock::time_point now);
  // A connection error on a call in flight, or its op_timeout.
  void connection_failed(Waits::iterator it, int rc, Clock::time_point now);

  void tell(Waits::iterator it, std::optional<core::Granted> granted, std::exception_ptr error);
  // Ends `w` with the ZooKeeper error `rc` of `what`, after withdrawing its node if any.
  void fail(Waits::iterator it, int rc, const std::string& what, Clock::time_point now);
  // Queues `w` again under a fresh GUID: on the session, or on the next one once the
  // engine has opened it (its node went with an expired one).
  // Waits asked before it that await the next session go first (resume_awaiting).
  void requeue(Waits::iterator it, Clock::time_point now, bool first = false);
  // Queues again every wait awaiting a session, in the order asked, while one is live.
  void resume_awaiting(Clock::time_point now);
  void schedule(Wait& w, std::optional<Clock::time_point> at);
  void unwatch(Wait& w);

  Host& host_;
  const ZkConfig config_;
  const std::string client_id_;
  core::WaitInbox<Wait> inbox_;  // before the waits, whose stop callbacks use it

  // From the C client's thread.
  std::mutex mu_;
  std::vector<Answer> answers_;                              // guarded by mu_
  // Watched path → wait, each key a view of its wait's `watched` (which stays put while
  // registered): a wait's watch costs one small node, not a copy of a long path.
  std::unordered_multimap<std::string_view, std::uint64_t> watchers_;  // guarded by mu_
  std::atomic<bool> state_changed_{false};

  // The thread's own.
  Waits waits_;
  core::WaitTimers timers_;
  std::set<std::uint64_t> awaiting_;  // waits in Step::awaiting_session, in the order asked
};

}  // namespace warden::engines::zookeeper
