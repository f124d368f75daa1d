#include "engines/postgres/pg_waits.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "warden/error.h"

namespace warden::engines::postgres {
using std::chrono::milliseconds;

struct PgWaits::Wait {
  Wait(core::AcquireRequest r, core::Engine::AcquireDone d)
      : request(std::move(r)), done(std::move(d)) {}

  enum class Step { queued, connecting, looking_up, asking, confirming };

  std::uint64_t id = 0;
  core::AcquireRequest request;
  core::Engine::AcquireDone done;
  AcquireTerms terms;
  Step step = Step::queued;
  std::unique_ptr<PgConnection> conn;  // from begin() on
  std::int64_t lock_id = 0;
  int lookups = 0;
  bool ready = false;                 // has a session and its lock's id: may ask
  std::optional<AcquireSteps> steps;  // asking: refers to request and terms
  Clock::time_point asked{};          // the first statement's send: the lease counts from it
  bool statement_waits = false;       // the statement in flight is the wait's own
  Clock::time_point give_up_at = Clock::time_point::max();
  Clock::time_point last_cancel{};  // the epoch: none sent
  bool stop_requested = false;
  std::optional<Clock::time_point> timer;
  // Last: deregistered first when the wait is destroyed.
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

std::shared_ptr<PgWaits> PgWaits::start(Host host) {
  std::shared_ptr<PgWaits> waits(new PgWaits(std::move(host)));
  // The thread holds the object: it may outlive the engine when stop() runs on it.
  waits->inbox_.start([waits] { waits->run(); });
  return waits;
}

PgWaits::PgWaits(Host host) : host_(std::move(host)), inbox_("postgres://") {}

PgWaits::~PgWaits() = default;

void PgWaits::acquire(core::AcquireRequest request, core::Engine::AcquireDone done) {
  inbox_.submit(std::make_unique<Wait>(std::move(request), std::move(done)));
}

void PgWaits::stop() { inbox_.stop(); }

void PgWaits::run() {
  while (!inbox_.stopping()) turn();
  line_.clear();
  asks_.clear();
  timers_.clear();
  inbox_.close(waits_);  // closes the sessions of the waits it tells
}

void PgWaits::turn() {
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
    it->second->terms = AcquireTerms::of(it->second->request, host_.config.op_timeout, now);
    if (!it->second->terms.wait) {
      begin(it, now);  // a try never queues
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

  const auto ready = core::poll_sessions(
      inbox_.wake_fd(), waits_,
      [](const Wait& w) -> std::optional<pollfd> {
        if (!w.conn || w.conn->socket() < 0) return std::nullopt;
        return pollfd{w.conn->socket(), w.conn->events(), 0};
      },
      timers_.next());
  now = Clock::now();
  for (const auto& [id, revents] : ready) {
    const auto it = waits_.find(id);
    if (it != waits_.end()) progress(it, now);
    if (inbox_.stopping()) return;
  }
}

void PgWaits::admit(Clock::time_point now) {
  line_.admit(
      waits_,
      [&](Waits::iterator it) {
        if (in_session_ >= host_.sessions) return false;
        begin(it, now);
        return true;
      },
      [&] { return inbox_.stopping(); });
}

void PgWaits::begin(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  ++in_session_;
  w.step = Wait::Step::connecting;  // holds a session (slot) from here on
  asks_.began(w.id);
  try {
    w.conn = host_.idle_session();
    if (w.conn) {
      connected(it, now);
      return;
    }
    w.conn = PgConnection::start(host_.config);
  } catch (const Error&) {
    tell(it, std::nullopt, std::current_exception());
    return;
  }
  w.statement_waits = false;
  w.give_up_at = now + host_.config.op_timeout;
  schedule(w, now);
}

void PgWaits::connected(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  if (const auto id = host_.known_id(w.request.key)) {
    w.lock_id = *id;
    ready(w, now);
    ask_in_order(now);
    return;
  }
  look_up(w, now);
}

void PgWaits::ready(Wait& w, Clock::time_point now) {
  w.ready = true;
  w.statement_waits = false;
  w.give_up_at = Clock::time_point::max();  // nothing in flight until it asks
  schedule(w, now);
}

void PgWaits::ask_in_order(Clock::time_point now) {
  asks_.ask_ready(
      waits_, [](const Wait& w) { return w.ready; },
      [&](Waits::iterator it) {
        ask(it, now);
        return !inbox_.stopping();
      });
}

void PgWaits::look_up(Wait& w, Clock::time_point now) {
  w.step = Wait::Step::looking_up;
  const std::string sql = lock_id_sql(host_.config.schema);
  send(w, Statement{nullptr, &sql, lock_id_params(w.request.key), false}, now);
}

void PgWaits::ask(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  w.step = Wait::Step::asking;
  // Its terms from now, as the blocking acquire's from when it has its session: a login
  // that took some of the wait shortens the server's lock_timeout by as much.
  w.terms = AcquireTerms::of(w.request, host_.config.op_timeout, now);
  w.steps.emplace(*host_.sql, w.request, w.lock_id, w.terms);
  w.asked = now;
  try {
    send(w, w.steps->start(w.conn->idle_timeout_ms()), now);
  } catch (const Error&) {
    tell(it, std::nullopt, std::current_exception());
  }
}

void PgWaits::send(Wait& w, const Statement& statement, Clock::time_point now) {
  // Throws with the session closed.
  if (statement.name != nullptr) {
    w.conn->send_prepared(*statement.name, *statement.sql, statement.params);
  } else {
    w.conn->send(*statement.sql, statement.params);
  }
  w.statement_waits = statement.waits;
  w.give_up_at = statement.waits ? w.terms.limits.give_up_at : now + host_.config.op_timeout;
  w.last_cancel = Clock::time_point{};
  schedule(w, now);
}

void PgWaits::progress(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  std::optional<Reply> reply;
  try {
    if (w.step == Wait::Step::connecting) {
      if (w.conn->connect_step()) {
        w.give_up_at = Clock::time_point::max();
        connected(it, now);
      }
      return;
    }
    reply = w.conn->reply_if_ready();
  } catch (const Error&) {  // the login failed, or the session broke: it is closed
    tell(it, std::nullopt, std::current_exception());
    return;
  }
  if (reply) answered(it, *reply, now);
}

void PgWaits::answered(Waits::iterator it, const Reply& reply, Clock::time_point now) {
  Wait& w = *it->second;
  try {
    switch (w.step) {
      case Wait::Step::looking_up:
        if (const auto id = lock_id_of(reply, w.request.key)) {
          w.lock_id = *id;
          host_.learnt_id(w.request.key, *id);
          ready(w, now);
          ask_in_order(now);
        } else if (++w.lookups < kLockIdAttempts) {
          look_up(w, now);
        } else {
          throw lock_id_missing(w.request.key);
        }
        return;
      case Wait::Step::asking: {
        if (!reply.ok()) {
          w.conn->close();  // a cancel can land after the lock was taken: end the session
          AcquireSql::ended_or_throw(reply, w.request);
          tell(it, std::nullopt, nullptr);
          return;
        }
        if (const auto next = w.steps->next(reply, *w.conn)) {
          send(w, *next, now);
          return;
        }
        if (!w.steps->token()) {  // a try that found no room: nothing is held
          host_.pool(std::move(w.conn));
          tell(it, std::nullopt, nullptr);
          return;
        }
        if (now - w.asked <= w.request.options.ttl / 4) {
          tell(it, host_.keep(w.request, std::move(w.conn), *w.steps->token(), w.asked), nullptr);
          return;
        }
        // The server's idle clock starts when the grant's reply is sent, which is no
        // earlier than our send. After a long wait that bound is stale: one more round
        // trip restarts the clock from a known time.
        static const std::string kPing = "SELECT 1";
        w.step = Wait::Step::confirming;
        w.asked = now;
        send(w, Statement{nullptr, &kPing, {}, false}, now);
        return;
      }
      case Wait::Step::confirming:
        if (!reply.ok()) throw_reply(reply, "confirming the grant of " + w.request.key.joined());
        tell(it, host_.keep(w.request, std::move(w.conn), *w.steps->token(), w.asked), nullptr);
        return;
      case Wait::Step::queued:
      case Wait::Step::connecting:
        return;
    }
  } catch (const Error&) {
    tell(it, std::nullopt, std::current_exception());  // closes the session
  }
}

void PgWaits::fire(Waits::iterator it, Clock::time_point now) {
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
  if (now >= w.give_up_at) {
    // The server answered neither the statement nor its cancel in time (frozen, or cut
    // off). Closing the session frees whatever it took once the server sees it.
    w.conn->close();
    const Error late(Errc::deadline_exceeded, w.step == Wait::Step::connecting
                                                  ? "PostgreSQL did not finish the login in time"
                                                  : "PostgreSQL did not answer in time");
    if (w.statement_waits && AcquireSql::ended_unanswered(late, w.request, w.terms)) {
      tell(it, std::nullopt, nullptr);
    } else {
      tell(it, std::nullopt, std::make_exception_ptr(late));
    }
    return;
  }
  const bool cancel_due =
      w.statement_waits && (w.stop_requested || now >= w.terms.limits.cancel_at);
  if (cancel_due && now - w.last_cancel >= kCancelRepeat) {
    if (w.last_cancel == Clock::time_point{} &&
        w.terms.limits.after_cancel != Clock::duration::max()) {
      w.give_up_at = std::min(w.give_up_at, now + w.terms.limits.after_cancel);
    }
    w.conn->cancel();
    w.last_cancel = now;
  }
  schedule(w, now);
}

void PgWaits::stopped(std::uint64_t id, Clock::time_point now) {
  const auto it = waits_.find(id);
  if (it == waits_.end()) return;
  Wait& w = *it->second;
  w.stop_requested = true;
  switch (w.step) {
    case Wait::Step::queued:
    case Wait::Step::connecting:
    case Wait::Step::looking_up:
      tell(it, std::nullopt, nullptr);  // nothing taken: the session (if any) is closed
      return;
    case Wait::Step::asking:
    case Wait::Step::confirming:
      schedule(w, now);  // a waiting statement is cancelled at once; the others end soon
      return;
  }
}

void PgWaits::tell(Waits::iterator it, std::optional<core::Granted> granted,
                   std::exception_ptr error) {
  Wait& w = *it->second;
  timers_.set(w.timer, w.id, std::nullopt);
  if (w.step != Wait::Step::queued) --in_session_;
  core::tell_and_forget(waits_, it, std::move(granted), error);  // its session closes first
}

void PgWaits::schedule(Wait& w, Clock::time_point now) {
  Clock::time_point at = w.give_up_at;
  if (w.step == Wait::Step::queued) {
    at = w.request.deadline;
  } else if (w.statement_waits) {
    if (w.last_cancel != Clock::time_point{}) {
      at = std::min(at, w.last_cancel + kCancelRepeat);
    } else if (w.stop_requested) {
      at = now;
    } else {
      at = std::min(at, w.terms.limits.cancel_at);
    }
  }
  timers_.set(w.timer, w.id,
              at == Clock::time_point::max() ? std::nullopt : std::optional<Clock::time_point>(at));
}

}  // namespace warden::engines::postgres
