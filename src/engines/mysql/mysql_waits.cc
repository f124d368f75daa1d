#include "engines/mysql/mysql_waits.h"

#include <poll.h>

#include <algorithm>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "engines/mysql/registry_schema.h"
#include "warden/error.h"

namespace warden::engines::mysql {
namespace {

using std::chrono::milliseconds;

// How often waits queued for a session look for one: sessions come free on other
// threads too (a release), which do not wake this one.
constexpr milliseconds kSessionLook{50};

// The single value of a statement's first result set, or nullptr.
const Field* single(const std::vector<ResultSet>& sets) {
  return !sets.empty() && sets[0].size() == 1 && sets[0][0].size() == 1 ? &sets[0][0][0] : nullptr;
}

}  // namespace

struct MysqlWaits::Wait {
  Wait(core::AcquireRequest r, core::Engine::AcquireDone d)
      : request(std::move(r)), done(std::move(d)) {}

  enum class Step { queued, connecting, registering, asking, withdrawing, durable };

  std::uint64_t id = 0;
  core::AcquireRequest request;
  core::Engine::AcquireDone done;
  Step step = Step::queued;
  std::unique_ptr<Connection> conn;  // from begin() on
  bool ready = false;                // has a session and its lock's id: may ask
  std::uint64_t lock_id = 0;
  std::uint64_t token = 0;
  std::string sql;           // the statement in flight (libmariadb reads it as it sends)
  Clock::time_point sent{};  // the grant's send: the lease counts from it
  Clock::time_point give_up_at = Clock::time_point::max();
  std::optional<Clock::time_point> pause_until;  // libmariadb's own pause
  bool killed = false;                           // KILL QUERY asked for its statement
  bool stop_requested = false;
  std::optional<Clock::time_point> timer;
  // Last: deregistered first when the wait is destroyed.
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

std::shared_ptr<MysqlWaits> MysqlWaits::start(Host host) {
  std::shared_ptr<MysqlWaits> waits(new MysqlWaits(std::move(host)));
  // The thread holds the object: it may outlive the engine when stop() runs on it.
  waits->inbox_.start([waits] { waits->run(); });
  return waits;
}

MysqlWaits::MysqlWaits(Host host) : host_(std::move(host)), inbox_("mysql://") {}

MysqlWaits::~MysqlWaits() = default;

void MysqlWaits::acquire(core::AcquireRequest request, core::Engine::AcquireDone done) {
  inbox_.submit(std::make_unique<Wait>(std::move(request), std::move(done)));
}

void MysqlWaits::stop() { inbox_.stop(); }

void MysqlWaits::run() {
  while (!inbox_.stopping()) turn();
  line_.clear();
  asks_.clear();
  timers_.clear();
  // The waits it tells close their sessions: the pool's count stays right, since the
  // engine (and its pool) ends with this thread's owner.
  inbox_.close(waits_);
}

void MysqlWaits::turn() {
  auto taken = inbox_.take();
  auto now = Clock::now();
  const std::vector<std::uint64_t> fresh = core::WaitInbox<Wait>::admit(taken, waits_);
  // Cancellations first: a wait cancelled before it began is told without a session.
  for (const std::uint64_t id : taken.cancelled) {
    stopped(id, now);
    if (inbox_.stopping()) return;
  }
  for (const std::uint64_t id : fresh) {
    const auto it = waits_.find(id);
    if (it == waits_.end()) continue;
    if (it->second->request.deadline <= now) {
      // A try never queues: without a free session it fails as the blocking try does.
      if (!begin(it, now)) {
        tell(it, std::nullopt,
             std::make_exception_ptr(
                 Error(Errc::resource_exhausted,
                       "mysql: all " + std::to_string(host_.pool->config().pool) +
                           " sessions of this client are in use (held locks and waits); raise "
                           "?pool=N")));
      }
    } else {
      line_.join(id);
      schedule(*it->second, now);
    }
    if (inbox_.stopping()) return;
  }
  admit(now);
  if (inbox_.stopping()) return;
  while (const auto id = timers_.due(now)) {
    fire(waits_.find(*id), now);
    if (inbox_.stopping()) return;
    now = Clock::now();
  }
  admit(now);
  if (inbox_.stopping()) return;

  auto until = timers_.next();
  if (!line_.empty()) until = std::min(until, Clock::now() + kSessionLook);
  const auto ready = core::poll_sessions(
      inbox_.wake_fd(), waits_,
      [](const Wait& w) -> std::optional<pollfd> {
        if (!w.conn || w.conn->socket() < 0 || w.pause_until) return std::nullopt;
        const bool in_flight = !w.ready || w.step == Wait::Step::asking ||
                               w.step == Wait::Step::withdrawing || w.step == Wait::Step::durable;
        if (w.step == Wait::Step::queued || !in_flight) return std::nullopt;
        return pollfd{w.conn->socket(), w.conn->poll_events(), 0};
      },
      until);
  now = Clock::now();
  for (const auto& [id, revents] : ready) {
    const auto it = waits_.find(id);
    if (it != waits_.end()) progress(it, Connection::ready_from(revents), now);
    if (inbox_.stopping()) return;
  }
}

void MysqlWaits::admit(Clock::time_point now) {
  line_.admit(
      waits_, [&](Waits::iterator it) { return begin(it, now); },
      [&] { return inbox_.stopping(); });
}

bool MysqlWaits::begin(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  bool pooled = true;
  try {
    w.conn = host_.pool->take_idle();
    if (!w.conn) {
      if (!host_.pool->reserve()) return false;
      pooled = false;
      try {
        w.conn = Connection::connecting(host_.pool->config());
      } catch (...) {
        host_.pool->unreserve();
        throw;
      }
    }
  } catch (const Error&) {
    tell(it, std::nullopt, std::current_exception());
    return true;
  }
  asks_.began(w.id);
  w.step = Wait::Step::connecting;
  if (pooled || (w.conn->poll_events() == 0 && !w.conn->library_pause())) {  // logged in
    connected(it, now);
    return true;
  }
  w.give_up_at = now + host_.pool->config().op_timeout;
  schedule(w, now);
  return true;
}

void MysqlWaits::connected(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  if (const auto id = host_.known_id(w.request.key)) {
    w.lock_id = *id;
    ready(w, now);
    ask_in_order(now);
    return;
  }
  // The registry row, on the wait's own session (the blocking acquire borrows one).
  w.step = Wait::Step::registering;
  w.sql = "INSERT INTO warden_locks (grp, name) VALUES (" + hex_literal(w.request.key.group) +
          ", " + hex_literal(w.request.key.name) +
          ") ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id); SELECT LAST_INSERT_ID()";
  send(it, false, now);
}

void MysqlWaits::ready(Wait& w, Clock::time_point now) {
  w.ready = true;
  w.give_up_at = Clock::time_point::max();  // nothing in flight until it asks
  schedule(w, now);
}

void MysqlWaits::ask_in_order(Clock::time_point now) {
  asks_.ask_ready(
      waits_, [](const Wait& w) { return w.ready; },
      [&](Waits::iterator it) {
        ask(it, now);
        return !inbox_.stopping();
      });
}

void MysqlWaits::ask(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  w.step = Wait::Step::asking;
  try {
    w.sql = host_.grant_sql(w.request, w.lock_id, w.conn->wait_timeout());
  } catch (const Error&) {
    tell(it, std::nullopt, std::current_exception(), true);
    return;
  }
  w.sent = now;
  send(it, true, now);
}

void MysqlWaits::send(Waits::iterator it, bool waits, Clock::time_point now) {
  Wait& w = *it->second;
  const auto op_timeout = host_.pool->config().op_timeout;
  w.killed = false;
  // GET_LOCK's own timeout bounds a timed wait; op_timeout more for the round trip.
  if (!waits) {
    w.give_up_at = now + op_timeout;
  } else if (w.request.deadline == Clock::time_point::max()) {
    w.give_up_at = Clock::time_point::max();
  } else {
    w.give_up_at = std::max(w.request.deadline, now) + op_timeout;
  }
  if (w.conn->start(w.sql)) {
    answered(it, now);
    return;
  }
  if (waits && w.stop_requested) {  // cancelled as it was sent: end it at once
    fire(it, now);
    return;
  }
  schedule(w, now);
}

void MysqlWaits::progress(Waits::iterator it, int ready, Clock::time_point now) {
  Wait& w = *it->second;
  try {
    if (w.step == Wait::Step::connecting) {
      if (w.conn->connect_resume(ready)) {
        w.give_up_at = Clock::time_point::max();
        connected(it, now);
      } else {
        schedule(w, now);
      }
      return;
    }
  } catch (const Error&) {  // the login failed: the session is closed
    tell(it, std::nullopt, std::current_exception());
    return;
  }
  if (w.conn->resume(ready)) {
    answered(it, now);
  } else {
    schedule(w, now);
  }
}

void MysqlWaits::answered(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  w.pause_until.reset();
  std::vector<ResultSet> sets;
  try {
    switch (w.step) {
      case Wait::Step::registering: {
        sets = w.conn->results("register " + w.request.key.joined());
        const Field* id = single(sets);
        if (sets.size() != 1 || id == nullptr) {
          throw Error(Errc::internal,
                      "mysql: unexpected reply while registering " + w.request.key.joined());
        }
        w.lock_id = to_u64(*id, "lock id");
        host_.learnt_id(w.request.key, w.lock_id);
        ready(w, now);
        ask_in_order(now);
        return;
      }
      case Wait::Step::asking:
        sets =
            w.conn->results("acquire " + w.request.key.joined() + (w.killed ? " (cancelled)" : ""));
        w.conn->set_wait_timeout(host_.idle_for(w.request.options.ttl));
        granted_answer(it, sets, now);
        return;
      case Wait::Step::withdrawing:
        // Its reply means the killed statement has ended on the server too.
        (void)w.conn->results("withdraw a cancelled wait");
        tell(it, std::nullopt, nullptr, true);
        return;
      case Wait::Step::durable:
        sets = w.conn->results("make tokens durable");
        host_.durable_answer(sets, w.token);
        tell(it, host_.hold(w.request, std::move(w.conn), w.lock_id, w.token, w.sent), nullptr);
        return;
      case Wait::Step::queued:
      case Wait::Step::connecting:
        return;
    }
  } catch (const Error&) {
    if (w.step == Wait::Step::withdrawing || (w.step == Wait::Step::asking && w.stop_requested)) {
      tell(it, std::nullopt, nullptr);  // cancelled: the closed session ends what it held
      return;
    }
    tell(it, std::nullopt, std::current_exception());
  }
}

void MysqlWaits::granted_answer(Waits::iterator it, const std::vector<ResultSet>& sets,
                                Clock::time_point now) {
  Wait& w = *it->second;
  const Field* got = single(sets);
  if (got == nullptr) throw Error(Errc::internal, "mysql: unexpected reply to an acquire");
  if (!*got || w.stop_requested) {  // killed (NULL), or cancelled just as it was granted
    withdraw(it, now);
    return;
  }
  if (**got == "0") {  // GET_LOCK timed out: nothing left behind
    if (w.request.deadline == Clock::time_point::max()) {
      ask(it, now);  // a year went by: ask again
      return;
    }
    tell(it, std::nullopt, nullptr, true);
    return;
  }
  w.token = to_u64(*got, "token");
  if (w.token == kIsSemaphore) {  // warden_grant released the lock again
    tell(it, std::nullopt,
         std::make_exception_ptr(
             Error(Errc::invalid_argument,
                   "mysql: " + w.request.key.joined() + " is a semaphore in use, not a lock")),
         true);
    return;
  }
  if (auto sql = host_.durable_sql(w.token)) {
    w.step = Wait::Step::durable;
    w.sql = std::move(*sql);
    send(it, false, now);
    return;
  }
  tell(it, host_.hold(w.request, std::move(w.conn), w.lock_id, w.token, w.sent), nullptr);
}

void MysqlWaits::withdraw(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  if (!w.conn->usable()) {
    tell(it, std::nullopt, nullptr);
    return;
  }
  // What the session may hold (a grant that came with the stop) is released on it, and
  // its reply means the killed statement has ended on the server: status no longer shows
  // it waiting.
  w.step = Wait::Step::withdrawing;
  w.sql = "DO RELEASE_ALL_LOCKS()";
  send(it, false, now);
}

void MysqlWaits::fire(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  timers_.set(w.timer, w.id, std::nullopt);
  if (w.step == Wait::Step::queued) {  // its deadline passed before it had a session
    if (now >= w.request.deadline) {
      tell(it, std::nullopt, nullptr);
    } else {
      schedule(w, now);
    }
    return;
  }
  if (w.pause_until && now >= *w.pause_until) {  // libmariadb's own pause is over
    w.pause_until.reset();
    progress(it, Connection::kTimedOut, now);
    return;
  }
  if (now >= w.give_up_at) {
    // No reply in time (a frozen or cut-off server): closing the session frees whatever
    // it took once the server sees it.
    w.conn->close();
    const bool ended =
        w.step == Wait::Step::withdrawing ||
        (w.step == Wait::Step::asking && (w.stop_requested || now >= w.request.deadline));
    if (ended) {
      tell(it, std::nullopt, nullptr);
    } else {
      tell(it, std::nullopt,
           std::make_exception_ptr(
               Error(Errc::deadline_exceeded, w.step == Wait::Step::connecting
                                                  ? "mysql: the login took longer than op_timeout"
                                                  : "mysql: no reply from the server in time")));
    }
    return;
  }
  if (w.step == Wait::Step::asking && w.stop_requested && !w.killed) {
    // Have the server end the statement (KILL QUERY, sent by the killer's thread), then
    // wait for its reply op_timeout more at most.
    w.killed = true;
    host_.killer->kill(w.conn->id());
    w.give_up_at = std::min(w.give_up_at, now + host_.pool->config().op_timeout);
  }
  schedule(w, now);
}

void MysqlWaits::stopped(std::uint64_t id, Clock::time_point now) {
  const auto it = waits_.find(id);
  if (it == waits_.end()) return;
  Wait& w = *it->second;
  w.stop_requested = true;
  if (w.step == Wait::Step::asking) {
    schedule(w, now);  // killed at once
    return;
  }
  if (w.step == Wait::Step::withdrawing || w.step == Wait::Step::durable) return;
  tell(it, std::nullopt, nullptr, w.ready);  // nothing asked: nothing taken
}

void MysqlWaits::tell(Waits::iterator it, std::optional<core::Granted> granted,
                      std::exception_ptr error, bool keep_session) {
  Wait& w = *it->second;
  timers_.set(w.timer, w.id, std::nullopt);
  if (w.conn) {
    if (keep_session && w.conn->usable()) {
      const auto idle = w.conn->wait_timeout();
      host_.pool->give_back(std::move(w.conn), idle);
    } else {
      host_.pool->discard(std::move(w.conn));
    }
  }
  core::tell_and_forget(waits_, it, std::move(granted), error);
}

void MysqlWaits::schedule(Wait& w, Clock::time_point now) {
  Clock::time_point at = w.give_up_at;
  if (w.step == Wait::Step::queued) {
    at = w.request.deadline;
  } else if (w.step == Wait::Step::asking && w.stop_requested && !w.killed) {
    at = now;
  }
  w.pause_until.reset();
  if (w.conn && w.step != Wait::Step::queued) {
    if (const auto pause = w.conn->library_pause()) {
      w.pause_until = now + *pause;
      at = std::min(at, *w.pause_until);
    }
  }
  timers_.set(w.timer, w.id,
              at == Clock::time_point::max() ? std::nullopt : std::optional<Clock::time_point>(at));
}

}  // namespace warden::engines::mysql
