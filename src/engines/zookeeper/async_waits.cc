#include "engines/zookeeper/async_waits.h"

#include <algorithm>
#include <thread>
#include <type_traits>

#include "engines/resp_client/backoff.h"
#include "warden/error.h"

namespace warden::engines::zookeeper {
namespace {

// How often a wait whose session is suspended looks whether it is back.
constexpr auto kReconnectLook = std::chrono::milliseconds(100);
// Rounds of creating the parents before a create: the server's container check may
// remove an empty group node between its create and the lock node's, a few times at most.
constexpr int kParentRounds = 5;

// The same for the same names in any order (ZooKeeper does not sort a listing); their
// count is mixed in, so that a name leaving and another arriving rarely cancel out.
std::uint64_t fingerprint(const std::vector<std::string>& children) {
  std::uint64_t mixed = children.size();
  for (const std::string& name : children)
    mixed ^= std::hash<std::string>{}(name)*0x9e3779b97f4a7c15ULL;
  return mixed;
}

std::exception_ptr zk_error(int rc, const std::string& what) {
  try {
    throw_zk_error(rc, what);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

struct AsyncWaits::Wait {
  enum class Step {
    creating,          // the create and the listing behind it are in flight
    parents,           // the parents' creates are in flight
    listing,           // a listing is in flight
    watching,          // the watch on what is in the way (with a listing for a semaphore)
    withdrawing,       // the delete of the node is in flight
    parked,            // sleeping until woken, the next poll or the deadline
    reconnecting,      // the session is suspended: looking every kReconnectLook
    awaiting_session,  // the session expired: looking for the next every kReconnectLook
  };

  Wait(core::AcquireRequest r, std::string l, core::Engine::AcquireDone d, const RetryPolicy& retry)
      : request(std::move(r)), lock(std::move(l)), done(std::move(d)), poll(retry) {}

  std::uint64_t id = 0;
  core::AcquireRequest request;
  std::string lock;  // its lock's node (LockNodes::lock; the rest is made when needed)
  core::Engine::AcquireDone done;
  resp_client::Backoff poll;

  std::shared_ptr<ZkSession> session;
  std::string guid;
  Step step = Step::creating;
  std::uint64_t call = 0;            // the number of the latest call; older answers are dropped
  Clock::time_point called_at;       // when it was sent
  int parents_left = 0;
  int parents_rc = ZOK;
  int parent_rounds = 0;

  // The request node's path, once created (empty before). Its parsed name is not kept:
  // with thousands waiting, every string a wait keeps counts (own_node()).
  std::string path;
  std::int64_t czxid = 0;
  Clock::time_point listed_at;
  // The last listing's fingerprint, which a semaphore's watch compares: not the listing
  // itself, which with thousands waiting would be most of a wait's memory.
  std::uint64_t children = 0;
  std::string watched;       // the path whose watch wakes this wait
  bool woken = false;        // news arrived while a call was in flight
  bool ending = false;       // cancelled or ran out: withdraw, tell nothing
  bool asked = false;        // a create was sent (a try ends after its first)
  Clock::time_point began;   // when it began
  std::exception_ptr error;  // told once the withdraw is answered

  std::optional<Clock::time_point> timer;
  // Last: deregistered first when the wait is destroyed (core/wait_inbox.h).
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

namespace {

// The wait's request node, parsed from its path; nullopt before it is created.
std::optional<RequestNode> own_node(const std::string& path, Layout layout) {
  if (path.empty()) return std::nullopt;
  return parse_request(path.substr(path.rfind('/') + 1), layout);
}

}  // namespace

std::shared_ptr<AsyncWaits> AsyncWaits::start(Host& host, const ZkConfig& config,
                                              std::string client_id) {
  std::shared_ptr<AsyncWaits> waits(new AsyncWaits(host, config, std::move(client_id)));
  // The thread holds the object: it may outlive the engine when stop() runs on it, and
  // the C client's completions hold it until each is called.
  waits->inbox_.start([waits] { waits->run(); });
  return waits;
}

AsyncWaits::AsyncWaits(Host& host, const ZkConfig& config, std::string client_id)
    : host_(host), config_(config), client_id_(std::move(client_id)), inbox_("zk://") {}

AsyncWaits::~AsyncWaits() = default;

LockNodes AsyncWaits::nodes_of(const Wait& w) const {
  return LockNodes::of(config_.layout, config_.prefix, w.request.key.group, w.request.key.name);
}

void AsyncWaits::acquire(core::AcquireRequest request, LockNodes nodes,
                         core::Engine::AcquireDone done) {
  inbox_.submit(std::make_unique<Wait>(std::move(request), std::move(nodes.lock), std::move(done),
                                       config_.retry));
}

void AsyncWaits::on_node_event(const std::string& path) {
  std::vector<std::uint64_t> ids;
  {
    std::lock_guard lock(mu_);
    const auto [first, last] = watchers_.equal_range(path);
    for (auto it = first; it != last; ++it) ids.push_back(it->second);
  }
  for (const std::uint64_t id : ids) inbox_.notify(id);
}

void AsyncWaits::on_state_change() {
  state_changed_ = true;
  inbox_.wake();
}

void AsyncWaits::stop() { inbox_.stop(); }

void AsyncWaits::run() {
  while (!inbox_.stopping()) turn();
  timers_.clear();
  awaiting_.clear();
  {
    std::lock_guard lock(mu_);
    answers_.clear();
    watchers_.clear();
  }
  inbox_.close(waits_);
}

void AsyncWaits::turn() {
  auto taken = inbox_.take();
  const auto now = Clock::now();
  std::vector<Answer> answers;
  {
    std::lock_guard lock(mu_);
    answers.swap(answers_);
  }
  const std::vector<std::uint64_t> fresh = core::WaitInbox<Wait>::admit(taken, waits_);
  // Each step may tell a wait, and the last reference to the Client (the engine, and
  // this object's host) may go with what it is told: nothing more once stopping.
  for (const std::uint64_t id : taken.cancelled) {
    if (const auto it = waits_.find(id); it != waits_.end()) cancelled(it, now);
    if (inbox_.stopping()) return;
  }
  for (const std::uint64_t id : fresh) {
    if (const auto it = waits_.find(id); it != waits_.end()) begin(*it->second, now);
    if (inbox_.stopping()) return;
  }
  for (Answer& answer : answers) {
    answered(std::move(answer), now);
    if (inbox_.stopping()) return;
  }
  std::vector<std::uint64_t> woken_ids = std::move(taken.woken);
  if (state_changed_.exchange(false)) {
    for (const auto& [id, wait] : waits_) woken_ids.push_back(id);
    // In the order asked: waits that queue again after their session expired keep their
    // order among themselves.
    std::sort(woken_ids.begin(), woken_ids.end());
  }
  for (const std::uint64_t id : woken_ids) {
    if (const auto it = waits_.find(id); it != waits_.end()) woken(it, now);
    if (inbox_.stopping()) return;
  }
  while (const auto id = timers_.due(Clock::now())) {
    fire(waits_.find(*id), Clock::now());
    if (inbox_.stopping()) return;
  }
  inbox_.sleep_until(timers_.next());
}

void AsyncWaits::begin(Wait& w, Clock::time_point now) {
  if (w.done == nullptr) return;  // told already (cancelled before it began)
  requeue(waits_.find(w.id), now, /*first=*/true);
}

void AsyncWaits::requeue(Waits::iterator it, Clock::time_point now, bool first) {
  Wait& w = *it->second;
  const bool was_awaiting = awaiting_.erase(w.id) > 0;
  if (first) w.began = now;
  // Once it has asked, a wait past its deadline (a try: at once) ends rather than ask
  // again, as the blocking acquire's. Until it has asked it is given its deadline and at
  // least op_timeout to find a session, as the blocking acquire's connect is.
  if (!first && w.ending) {
    tell(it, std::nullopt, nullptr);  // nothing of it is left (or the maintainer's)
    return;
  }
  if (!first && w.asked && now >= w.request.deadline) {
    tell(it, std::nullopt, nullptr);
    return;
  }
  if (!first && !w.asked && now >= std::max(w.request.deadline, w.began + config_.op_timeout)) {
    tell(it, std::nullopt,
         std::make_exception_ptr(Error(Errc::unavailable,
                                       "zk://: no ZooKeeper session could "
                                       "be opened within op_timeout")));
    return;
  }
  unwatch(w);
  w.path.clear();
  w.parent_rounds = 0;
  w.session = host_.live_session();
  if (!w.session) {
    // Expired: one thread of the engine opens the next session (a blocking connect),
    // and its "connected" wakes every wait that looks for it.
    host_.open_session();
    w.step = Wait::Step::awaiting_session;
    awaiting_.insert(w.id);
    schedule(w, now + kReconnectLook);
    return;
  }
  if (!was_awaiting && !awaiting_.empty()) {
    // Waits asked before this one still look for the session it found (each learns of
    // an expiry from its own call, some before the next session was live): they queue
    // first, and this one in its turn.
    w.session = nullptr;
    w.step = Wait::Step::awaiting_session;
    awaiting_.insert(w.id);
    resume_awaiting(now);
    return;
  }
  w.guid = host_.next_guid();  // a fresh one: a node of the last may still be deleted
  if (w.session->state() == SessionState::connected) {
    send_create(w, now);
  } else {
    reconnect(w, now);  // creates once connected
  }
}

void AsyncWaits::resume_awaiting(Clock::time_point now) {
  while (!awaiting_.empty()) {
    const std::uint64_t id = *awaiting_.begin();
    const auto it = waits_.find(id);
    if (it == waits_.end()) {
      awaiting_.erase(awaiting_.begin());
      continue;
    }
    requeue(it, now);
    if (inbox_.stopping() || awaiting_.contains(id)) return;  // no session after all
  }
}

std::uint64_t AsyncWaits::next_call(Wait& w, Clock::time_point now) {
  w.called_at = now;
  // A call in flight is given op_timeout, as the blocking acquire's await does.
  schedule(w, now + config_.op_timeout);
  return ++w.call;
}

template <class T>
std::function<void(T)> AsyncWaits::answer_to(const Wait& w) {
  return [self = shared_from_this(), id = w.id, call = w.call](T result) {
    {
      std::lock_guard lock(self->mu_);
      self->answers_.push_back(Answer{id, call, Result(std::move(result))});
    }
    self->inbox_.wake();
  };
}

void AsyncWaits::send_create(Wait& w, Clock::time_point now) {
  w.step = Wait::Step::creating;
  w.asked = true;
  next_call(w, now);
  const auto& r = w.request;
  // A session answers its calls in order: the listing sees the node, in one round trip.
  w.session->create(nodes_of(w).request(r.mode, w.guid, r.permits, r.capacity),
                    request_data(r.mode, client_id_, r.value), ZOO_EPHEMERAL_SEQUENTIAL,
                    answer_to<CreateResult>(w));
  w.session->children(w.lock, false, answer_to<ChildrenResult>(w));
}

void AsyncWaits::send_parents(Wait& w, Clock::time_point now) {
  w.step = Wait::Step::parents;
  next_call(w, now);
  const auto parents = nodes_of(w).parents();
  w.parents_left = static_cast<int>(parents.size());
  w.parents_rc = ZOK;
  for (const auto& [path, mode] : parents) {
    w.session->create(path, "", mode, answer_to<CreateResult>(w));
  }
}

void AsyncWaits::list(Wait& w, Clock::time_point now) {
  unwatch(w);
  w.step = Wait::Step::listing;
  w.woken = false;
  next_call(w, now);
  w.session->children(w.lock, false, answer_to<ChildrenResult>(w));
}

void AsyncWaits::watch(Wait& w, const RequestNode& blocker, Clock::time_point now) {
  // A semaphore's request watches the lock's children: any earlier request's going may
  // make room. Registered before the watch is set, so that no event is missed.
  const bool counts = w.request.capacity > 0;
  std::string path = counts ? w.lock : w.lock + '/' + blocker.name;
  if (path != w.watched) {
    unwatch(w);
    w.watched = std::move(path);
    std::lock_guard lock(mu_);
    watchers_.emplace(w.watched, w.id);
  }
  send_watch(w, now);
}

void AsyncWaits::send_watch(Wait& w, Clock::time_point now) {
  w.step = Wait::Step::watching;
  w.woken = false;
  next_call(w, now);
  if (w.request.capacity > 0) {
    w.session->children(w.watched, true, answer_to<ChildrenResult>(w));
  } else {
    w.session->exists(w.watched, true, answer_to<ExistsResult>(w));
  }
}

void AsyncWaits::withdraw(Wait& w, Clock::time_point now) {
  unwatch(w);
  w.step = Wait::Step::withdrawing;
  next_call(w, now);
  auto done = answer_to<int>(w);
  w.session->remove(w.path, [done = std::move(done)](int rc) { done(rc); });
}

void AsyncWaits::park(Wait& w, Clock::time_point now) {
  w.step = Wait::Step::parked;
  schedule(w, std::min(w.request.deadline, now + w.poll.next_delay()));
}

void AsyncWaits::reconnect(Wait& w, Clock::time_point now) {
  unwatch(w);
  w.step = Wait::Step::reconnecting;
  const auto look = now + kReconnectLook;
  // By the deadline, unless it has passed (a wait not yet asked looks on until its bound).
  schedule(w, w.request.deadline > now ? std::min(w.request.deadline, look) : look);
}

void AsyncWaits::answered(Answer answer, Clock::time_point now) {
  const auto it = waits_.find(answer.id);
  if (it == waits_.end() || it->second->call != answer.call) return;  // a stale answer
  Wait& w = *it->second;
  // A call on a session that has expired is refused by the C client (ZINVALIDSTATE)
  // rather than answered ZSESSIONEXPIRED: the same news.
  std::visit(
      [](auto& result) {
        if constexpr (std::is_same_v<std::decay_t<decltype(result)>, int>) {
          if (result == ZINVALIDSTATE) result = ZSESSIONEXPIRED;
        } else {
          if (result.rc == ZINVALIDSTATE) result.rc = ZSESSIONEXPIRED;
        }
      },
      answer.result);
  switch (w.step) {
    case Wait::Step::creating:
      if (auto* made = std::get_if<CreateResult>(&answer.result)) {
        // Made, the wait keeps its path and the listing behind it decides; not made, the
        // wait has moved on (a later call, another step, or told), and the listing's
        // answer is dropped.
        created(it, *made, now);
      } else if (auto* listing = std::get_if<ChildrenResult>(&answer.result);
                 listing && !w.path.empty()) {
        // Made: the listing behind it decides (or, if it failed alone, another one).
        if (listing->rc == ZOK) {
          decide(it, std::move(listing->children), now);
        } else {
          list(w, now);
        }
      }
      return;
    case Wait::Step::parents:
      if (auto* made = std::get_if<CreateResult>(&answer.result)) parent_made(it, *made, now);
      return;
    case Wait::Step::listing:
      if (auto* listing = std::get_if<ChildrenResult>(&answer.result)) {
        listed(it, std::move(*listing), now);
      }
      return;
    case Wait::Step::watching:
      watched(it, answer.result, now);
      return;
    case Wait::Step::withdrawing:
      if (const int* rc = std::get_if<int>(&answer.result)) removed(it, *rc);
      return;
    case Wait::Step::parked:
    case Wait::Step::reconnecting:
    case Wait::Step::awaiting_session:
      return;
  }
}

void AsyncWaits::created(Waits::iterator it, const CreateResult& result, Clock::time_point now) {
  Wait& w = *it->second;
  if (result.rc == ZOK) {
    w.path = result.path;
    w.czxid = result.czxid;
    w.listed_at = w.called_at;
    return;  // the listing behind it decides
  }
  if (result.rc == ZNONODE) {  // no parents yet (or the server removed an empty one)
    if (w.ending) {
      tell(it, std::nullopt, nullptr);  // nothing was created
    } else if (++w.parent_rounds > kParentRounds) {
      fail(it, result.rc, "create under " + w.lock, now);
    } else {
      send_parents(w, now);
    }
    return;
  }
  if (is_connection_error(result.rc)) {
    // The create may have happened with only its answer lost: the maintainer finds such
    // a node by its GUID and deletes it; the wait creates again under a fresh GUID once
    // the session is connected (it may be behind that node until the maintainer's
    // delete: the place in the queue of a create whose answer was lost is not kept).
    host_.withdraw_later(w.session->id(), w.lock, w.guid, "");
    if (w.ending || Clock::now() >= w.request.deadline) {
      tell(it, std::nullopt, nullptr);
    } else {
      w.guid = host_.next_guid();
      reconnect(w, now);
    }
    return;
  }
  if (result.rc == ZSESSIONEXPIRED) {
    requeue(it, now);  // nothing was created: again on the next session
    return;
  }
  tell(it, std::nullopt, w.ending ? nullptr : zk_error(result.rc, "create under " + w.lock));
}

void AsyncWaits::parent_made(Waits::iterator it, const CreateResult& result,
                             Clock::time_point now) {
  Wait& w = *it->second;
  if (w.parents_rc == ZOK && result.rc != ZOK && result.rc != ZNODEEXISTS) w.parents_rc = result.rc;
  if (--w.parents_left > 0) return;
  const int rc = w.parents_rc;
  if (w.ending) {
    tell(it, std::nullopt, nullptr);  // nothing of the request was created
  } else if (rc == ZOK || rc == ZNONODE) {
    send_create(w, now);  // ZNONODE: an empty group removed meanwhile, made again
  } else if (is_connection_error(rc)) {
    reconnect(w, now);  // creates (the parents first) once connected
  } else if (rc == ZSESSIONEXPIRED) {
    requeue(it, now);
  } else {
    tell(it, std::nullopt, zk_error(rc, "create of " + w.lock + "'s parents"));
  }
}

void AsyncWaits::listed(Waits::iterator it, ChildrenResult result, Clock::time_point now) {
  Wait& w = *it->second;
  if (is_connection_error(result.rc) || result.rc == ZSESSIONEXPIRED) {
    connection_failed(it, result.rc, now);
    return;
  }
  if (result.rc != ZOK && result.rc != ZNONODE) {
    fail(it, result.rc, "list of " + w.lock, now);
    return;
  }
  w.listed_at = w.called_at;
  decide(it, std::move(result.children), now);
}

void AsyncWaits::decide(Waits::iterator it, std::vector<std::string> children,
                        Clock::time_point now) {
  Wait& w = *it->second;
  const auto own = own_node(w.path, config_.layout);
  if (!own || std::find(children.begin(), children.end(), own->name) == children.end()) {
    // The node went with its session (or was deleted under it): queued again, on the
    // next session if this one is gone.
    requeue(it, now);
    return;
  }
  // This wait never makes two nodes of one GUID (a lost create is made again under a
  // fresh one), so every node of its GUID is its own.
  std::optional<RequestNode> blocker;
  try {
    blocker = blocker_of(children, *own, nodes_of(w));
  } catch (const Error&) {
    w.error = std::current_exception();  // a lock and a semaphore under one name
    withdraw(w, now);
    return;
  }
  if (w.ending || (blocker && now >= w.request.deadline)) {
    w.ending = true;
    withdraw(w, now);
    return;
  }
  w.children = fingerprint(children);
  if (!blocker) {
    bool session_lost = false;
    bool suspended = false;
    auto granted =
        host_.grant(w.request, *w.session, w.path, w.czxid, w.listed_at, session_lost, suspended);
    if (granted) {
      tell(it, std::move(granted), nullptr);
    } else if (suspended) {
      // on_suspend=lose and the connection broke as the grant was made: once connected
      // again, a new listing proves the session alive and grants.
      reconnect(w, now);
    } else {
      requeue(it, now);  // session_lost
    }
    return;
  }
  watch(w, *blocker, now);
}

void AsyncWaits::watched(Waits::iterator it, const Result& result, Clock::time_point now) {
  Wait& w = *it->second;
  int rc = ZOK;
  bool changed = false;
  if (const auto* listing = std::get_if<ChildrenResult>(&result)) {
    rc = listing->rc;
    if (rc == ZOK && fingerprint(listing->children) != w.children) {
      w.listed_at = w.called_at;
      decide(it, listing->children, now);
      return;
    }
  } else if (const auto* seen = std::get_if<ExistsResult>(&result)) {
    rc = seen->rc;
    changed = rc == ZNONODE;  // what was in the way is gone already
  } else {
    return;
  }
  if (is_connection_error(rc) || rc == ZSESSIONEXPIRED) {
    connection_failed(it, rc, now);
    return;
  }
  if (rc != ZOK && rc != ZNONODE) {
    fail(it, rc, "watch of " + w.watched, now);
    return;
  }
  if (w.ending) {
    withdraw(w, now);
  } else if (changed || w.woken) {
    list(w, now);
  } else {
    park(w, now);
  }
}

void AsyncWaits::removed(Waits::iterator it, int rc) {
  Wait& w = *it->second;
  if (rc != ZOK && rc != ZNONODE && rc != ZSESSIONEXPIRED) {
    host_.withdraw_later(w.session->id(), w.lock, w.guid, w.path);
  }
  tell(it, std::nullopt, w.error);
}

void AsyncWaits::fire(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  schedule(w, std::nullopt);
  switch (w.step) {
    case Wait::Step::parked:
      if (now >= w.request.deadline) {
        w.ending = true;
        withdraw(w, now);
      } else {
        // The poll, in case a watch event was lost: the node in the way is looked at
        // (and watched) again, one call, and the lock listed only once it is gone. The
        // nodes before a request are only ever deleted, never added, so while it is
        // there it is still what is in the way; a lost session wakes the wait anyway.
        send_watch(w, now);
      }
      return;
    case Wait::Step::reconnecting: {
      const SessionState state = w.session->state();
      if (state == SessionState::expired) {
        requeue(it, now);  // the node went with the session
      } else if (!w.asked && !w.ending) {
        // Not asked yet (its session was suspended when it began): given its deadline
        // and at least op_timeout for the connection, as the blocking acquire's create.
        if (state == SessionState::connected) {
          send_create(w, now);
        } else if (now >= std::max(w.request.deadline, w.began + config_.op_timeout)) {
          tell(it, std::nullopt, zk_error(ZCONNECTIONLOSS, "create under " + w.lock));
        } else {
          reconnect(w, now);
        }
      } else if (w.ending || now >= w.request.deadline) {
        // Its delete could not be sent now: the maintainer's, once ZooKeeper answers
        // (a lost create's was queued by its GUID already).
        if (!w.path.empty()) host_.withdraw_later(w.session->id(), w.lock, w.guid, w.path);
        tell(it, std::nullopt, nullptr);
      } else if (state == SessionState::connected) {
        if (!w.path.empty()) {
          list(w, now);
        } else {
          send_create(w, now);
        }
      } else {
        reconnect(w, now);
      }
      return;
    }
    case Wait::Step::creating:
    case Wait::Step::parents:
      // No answer within op_timeout (a frozen server), as the blocking acquire's await:
      // a node of its GUID may yet be made, which the maintainer deletes.
      ++w.call;
      if (w.step == Wait::Step::creating) {
        host_.withdraw_later(w.session->id(), w.lock, w.guid, w.path);  // "": by its GUID
      }
      tell(it, std::nullopt,
           w.ending ? nullptr : zk_error(ZOPERATIONTIMEOUT, "waiting for ZooKeeper"));
      return;
    case Wait::Step::listing:
    case Wait::Step::watching:
    case Wait::Step::withdrawing:
      ++w.call;  // its answer, if it comes, is too late
      connection_failed(it, ZOPERATIONTIMEOUT, now);
      return;
    case Wait::Step::awaiting_session:
      // With a session, every wait that awaits one queues in the order asked.
      if (host_.live_session()) {
        resume_awaiting(now);
      } else {
        requeue(it, now);
      }
      return;
  }
}

void AsyncWaits::connection_failed(Waits::iterator it, int rc, Clock::time_point now) {
  Wait& w = *it->second;
  if (w.step == Wait::Step::withdrawing || w.ending || now >= w.request.deadline) {
    // Nothing more to wait for: the maintainer deletes the node once ZooKeeper answers
    // (or the session's end does).
    if (rc != ZSESSIONEXPIRED) host_.withdraw_later(w.session->id(), w.lock, w.guid, w.path);
    tell(it, std::nullopt, w.error);
    return;
  }
  if (rc == ZSESSIONEXPIRED) {
    requeue(it, now);  // the node went with the session
    return;
  }
  // Listed again once the session is connected (at once if it still says so: a frozen
  // server's connection is not yet known to be lost), until the deadline.
  reconnect(w, now);
}

void AsyncWaits::woken(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  if (w.ending) return;
  switch (w.step) {
    case Wait::Step::parked:
      list(w, now);
      return;
    case Wait::Step::reconnecting:
    case Wait::Step::awaiting_session:
      schedule(w, now);  // looks at the session's state on this turn
      return;
    case Wait::Step::watching:
    case Wait::Step::listing:
      w.woken = true;  // the answer under way may predate the news
      return;
    default:
      return;
  }
}

void AsyncWaits::cancelled(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  if (w.done == nullptr || w.ending) return;
  w.ending = true;
  if (w.session == nullptr || w.step == Wait::Step::awaiting_session) {
    tell(it, std::nullopt, nullptr);  // nothing of it is on ZooKeeper
    return;
  }
  switch (w.step) {
    case Wait::Step::parked:
      withdraw(w, now);
      return;
    case Wait::Step::reconnecting:
      schedule(w, now);  // withdraws on this turn
      return;
    default:
      return;  // the answer in flight decides
  }
}

void AsyncWaits::fail(Waits::iterator it, int rc, const std::string& what, Clock::time_point now) {
  Wait& w = *it->second;
  w.error = zk_error(rc, what);
  if (!w.path.empty()) {
    withdraw(w, now);
  } else {
    tell(it, std::nullopt, w.error);
  }
}

void AsyncWaits::tell(Waits::iterator it, std::optional<core::Granted> granted,
                      std::exception_ptr error) {
  Wait& w = *it->second;
  schedule(w, std::nullopt);
  unwatch(w);
  awaiting_.erase(w.id);
  core::tell_and_forget(waits_, it, std::move(granted), error);
}

void AsyncWaits::schedule(Wait& w, std::optional<Clock::time_point> at) {
  timers_.set(w.timer, w.id, at);
}

void AsyncWaits::unwatch(Wait& w) {
  if (w.watched.empty()) return;
  std::lock_guard lock(mu_);
  const auto [first, last] = watchers_.equal_range(w.watched);
  for (auto it = first; it != last; ++it) {
    if (it->second == w.id) {
      watchers_.erase(it);
      break;
    }
  }
  w.watched.clear();
}

}  // namespace warden::engines::zookeeper
