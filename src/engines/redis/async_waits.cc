#include "engines/redis/async_waits.h"

#include <algorithm>
#include <span>
#include <string_view>
#include <thread>

#include "engines/redis/script_replies.h"
#include "engines/resp_client/backoff.h"
#include "engines/resp_client/errors.h"
#include "warden/error.h"

namespace warden::engines::redis {

using resp_client::Reply;

struct AsyncWaits::Wait {
  Wait(core::AcquireRequest r, AcquirePlan p, std::shared_ptr<Subscriber> s,
       core::Engine::AcquireDone d, const RetryPolicy& poll_policy)
      : request(std::move(r)),
        plan(std::move(p)),
        done(std::move(d)),
        poll(poll_policy),
        subscriber(std::move(s)) {}

  // Rendered at each send, not kept (acquire_plan.h).
  resp_client::ScriptCall attempt_call() const {
    return plan.attempt(request, LockKeys::of(request.key));
  }
  resp_client::ScriptCall withdraw_call() const { return plan.withdraw(LockKeys::of(request.key)); }

  std::uint64_t id = 0;
  core::AcquireRequest request;
  AcquirePlan plan;
  core::Engine::AcquireDone done;
  resp_client::Backoff poll;    // between looks nothing woke
  bool asked = false;           // an attempt was sent: there may be an entry to withdraw
  bool on_wire = false;         // its attempt or withdraw is unanswered
  bool withdrawing = false;     // withdraw.lua sent: the wait ends with its answer
  bool stop_requested = false;  // cancelled
  bool woken = false;           // woken while its attempt was on the wire: look again
  bool asked_again = false;     // asked again at once after its connection closed
  // With min_replicas: its grant while the WAIT behind it is unanswered (token, sent),
  // and why the last grant was given back, told if its deadline passes.
  std::uint64_t unconfirmed_token = 0;
  Clock::time_point unconfirmed_sent;
  std::exception_ptr shortfall;
  std::optional<Clock::time_point> timer;
  // The watch goes before the subscriber it is registered with.
  std::shared_ptr<Subscriber> subscriber;
  std::unique_ptr<Subscriber::Watch> watch;
  // Last: deregistered first when the wait is destroyed.
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

std::shared_ptr<AsyncWaits> AsyncWaits::start(Setup setup) {
  std::shared_ptr<AsyncWaits> waits(new AsyncWaits(std::move(setup)));
  // The thread holds the object: it may outlive the engine when stop() runs on it.
  waits->inbox_.start([waits] { waits->run(); });
  return waits;
}

AsyncWaits::AsyncWaits(Setup setup) : setup_(std::move(setup)), inbox_("redis://") {}

AsyncWaits::~AsyncWaits() = default;

void AsyncWaits::acquire(core::AcquireRequest request, AcquirePlan plan,
                         std::shared_ptr<Subscriber> subscriber, core::Engine::AcquireDone done) {
  inbox_.submit(std::make_unique<Wait>(std::move(request), std::move(plan), std::move(subscriber),
                                       std::move(done), setup_.poll));
}

void AsyncWaits::stop() { inbox_.stop(); }

std::string AsyncWaits::context(std::string_view what) const {
  return std::string(what) + " on " + setup_.connector->endpoint();
}

void AsyncWaits::run() {
  while (!inbox_.stopping()) {
    try {
      turn();
    } catch (const Error& e) {
      conn_.reset();
      fail_on_wire(e);
    }
  }
  conn_.reset();
  on_wire_.clear();
  timers_.clear();
  inbox_.close(waits_);
}

void AsyncWaits::turn() {
  auto taken = inbox_.take();
  auto now = Clock::now();
  const std::vector<std::uint64_t> fresh = core::WaitInbox<Wait>::admit(taken, waits_);
  // Cancellations first: a wait cancelled before it was asked is told without a request.
  for (const std::uint64_t id : taken.cancelled) {
    stopped(id, now);
    if (inbox_.stopping()) return;
  }
  for (const std::uint64_t id : fresh) {
    if (const auto it = waits_.find(id); it != waits_.end()) attempt(*it->second, now);
    if (inbox_.stopping()) return;
  }
  for (const std::uint64_t id : taken.woken) {
    woken(id, now);
    if (inbox_.stopping()) return;
  }
  while (const auto id = timers_.due(now)) {
    fire(*waits_.at(*id), now);
    if (inbox_.stopping()) return;
  }

  if (conn_) conn_->flush(now + setup_.op_timeout);
  auto until = timers_.next();
  if (!on_wire_.empty()) until = std::min(until, on_wire_.front().at + setup_.op_timeout);
  if (!conn_) {
    inbox_.sleep_until(until);
    return;
  }
  auto reply = conn_->poll_reply(until, inbox_.wake_fd());
  while (reply) {
    if (on_wire_.empty()) throw resp_client::unexpected_reply(*reply, context("acquire"));
    const OnWire request = on_wire_.front();
    on_wire_.pop_front();
    answered(request, *reply);
    if (inbox_.stopping() || !conn_) return;
    reply = conn_->poll_reply(Clock::now());
  }
  if (!on_wire_.empty() && Clock::now() >= on_wire_.front().at + setup_.op_timeout) {
    // A frozen or cut-off server: the blocking acquire's round would fail the same way.
    throw Error(Errc::deadline_exceeded, context("acquire") + ": no answer within " +
                                             std::to_string(setup_.op_timeout.count()) + " ms");
  }
}

void AsyncWaits::attempt(Wait& w, Clock::time_point now) {
  schedule(w, std::nullopt);
  w.woken = false;
  w.asked = true;
  w.shortfall = nullptr;  // asked again in time: its outcome is this attempt's
  send(w, w.attempt_call(), Sent::attempt, true, now);
}

void AsyncWaits::withdraw(Wait& w, Clock::time_point now) {
  schedule(w, std::nullopt);
  w.withdrawing = true;
  send(w, w.withdraw_call(), Sent::withdraw, true, now);
}

bool AsyncWaits::send(Wait& w, const resp_client::ScriptCall& call, Sent what, bool by_sha,
                      Clock::time_point now) {
  // A connection the server closed, or (behind Sentinel) no longer the master's, is
  // replaced once nothing is owed on it.
  if (conn_ && on_wire_.empty() &&
      (!conn_->reusable() || !resp_client::still_current(*conn_, setup_.connector->options()))) {
    conn_.reset();
  }
  if (!conn_) {
    try {
      conn_ = setup_.connector->connect();
    } catch (const Error& e) {
      if (what != Sent::forget) failed(waits_.find(w.id), e);
      return false;
    }
  }
  // A request whose answer nobody reads is sent in full (by_sha false): a NOSCRIPT
  // answer to it would go unheard, and the request undone.
  conn_->append(resp_client::script_command(call, by_sha));
  on_wire_.push_back(OnWire{w.id, what, now});
  if (what != Sent::forget) w.on_wire = true;
  return true;
}

void AsyncWaits::answered(const OnWire& request, const Reply& reply) {
  const auto it = waits_.find(request.id);
  if (request.what == Sent::forget || it == waits_.end()) return;
  Wait& w = *it->second;
  w.on_wire = false;
  const auto now = Clock::now();
  // A server that refuses writes as a replica is no longer the master: every request on
  // its connection fails as a closed connection's would, and the next one asks the
  // sentinels where the master is now.
  if (reply.error_code() == "READONLY") {
    setup_.connector->server_moved(*conn_);
    const Error why(Errc::unavailable, conn_->endpoint() + " is no longer the master");
    failed(it, why);
    throw why;
  }
  if (request.what == Sent::replicas) {
    replicas_answered(it, reply);
    return;
  }
  if (reply.error_code() == "NOSCRIPT") {  // a restart or SCRIPT FLUSH: sent in full
    send(w, request.what == Sent::attempt ? w.attempt_call() : w.withdraw_call(), request.what,
         false, now);
    return;
  }
  if (request.what == Sent::withdraw) {
    // The wait ran out (told why its last grant was given back, if it was) or was
    // cancelled.
    tell(it, std::nullopt, w.stop_requested ? nullptr : w.shortfall);
    return;
  }
  attempt_answered(it, reply, request.at);
}

void AsyncWaits::attempt_answered(Waits::iterator it, const Reply& reply, Clock::time_point sent) {
  Wait& w = *it->second;
  const auto now = Clock::now();
  w.asked_again = false;  // answered: Redis was reached
  Attempt attempt;
  try {
    attempt = attempt_of(reply, context("acquire"));
  } catch (const Error& e) {
    // An error reply (LOADING, MASTERDOWN, a refused permission). The script may have
    // queued the wait before it failed: withdrawn, unconfirmed; then the wait goes on or
    // ends as after a failed request (failed(): behind Sentinel a transient one asks
    // again within the wait, as the blocking acquire does).
    send(w, w.withdraw_call(), Sent::forget, false, now);
    failed(it, e);
    return;
  } catch (...) {
    send(w, w.withdraw_call(), Sent::forget, false, now);
    tell(it, std::nullopt, std::current_exception());
    return;
  }
  if (attempt.granted) {
    if (w.stop_requested) {
      withdraw(w, now);  // withdraw.lua gives the grant back: nobody will use it
      return;
    }
    if (!setup_.replicas_wait.empty()) {
      // Told once enough replicas have it, as the blocking acquire's WAIT says (sent on
      // the connection that wrote the grant, which WAIT's count is about).
      w.unconfirmed_token = attempt.token;
      w.unconfirmed_sent = sent;
      send_replicas_wait(w, now);
      return;
    }
    grant(it, attempt.token, sent);
    return;
  }
  if (!w.plan.waits) {
    tell(it, std::nullopt, nullptr);  // a try queues nothing
    return;
  }
  if (w.stop_requested || now >= w.request.deadline) {
    withdraw(w, now);
    return;
  }
  sleep(w, now, attempt.retry_ms);
}

void AsyncWaits::grant(Waits::iterator it, std::uint64_t token, Clock::time_point sent) {
  Wait& w = *it->second;
  core::GrantRef grant{w.request.key,         w.request.mode, token,
                       w.request.options.ttl, w.plan.owner,   w.request.permits};
  if (setup_.granted && !inbox_.stopping()) setup_.granted(grant);
  const auto expires = sent + w.request.options.ttl;
  tell(it, core::Granted{std::move(grant), expires}, nullptr);
}

void AsyncWaits::send_replicas_wait(Wait& w, Clock::time_point now) {
  conn_->append(std::span<const std::string>(setup_.replicas_wait));
  // WAIT may take its own timeout: the frozen-server bound runs from its end.
  on_wire_.push_back(OnWire{w.id, Sent::replicas, now + setup_.replica_timeout});
  w.on_wire = true;
}

void AsyncWaits::replicas_answered(Waits::iterator it, const Reply& reply) {
  Wait& w = *it->second;
  const auto now = Clock::now();
  // The requests behind the WAIT waited for it on the server: their bound runs from now.
  for (OnWire& behind : on_wire_) behind.at = std::max(behind.at, now);
  // An error reply counts no replica, as for the blocking acquire.
  const std::int64_t acknowledged = reply.is_integer() ? reply.integer : 0;
  if (w.stop_requested) {
    withdraw(w, now);  // withdraw.lua gives the grant back: nobody will use it
    return;
  }
  if (acknowledged >= setup_.min_replicas) {
    grant(it, w.unconfirmed_token, w.unconfirmed_sent);
    return;
  }
  // A grant a failover could lose: given back (withdraw.lua gives back the grant made for
  // this wait), and the acquire fails, or asks again within its wait, as replicas may
  // catch up.
  send(w, w.withdraw_call(), Sent::forget, false, now);
  w.shortfall = std::make_exception_ptr(too_few_replicas(
      context("acquire"), acknowledged, setup_.min_replicas, setup_.replica_timeout));
  if (!w.plan.waits || now >= w.request.deadline) {
    tell(it, std::nullopt, w.shortfall);
    return;
  }
  schedule(w, std::min(w.request.deadline, now + w.poll.next_delay()));
}

void AsyncWaits::sleep(Wait& w, Clock::time_point now, std::int64_t retry_ms) {
  auto until = std::min(w.request.deadline, now + w.poll.next_delay());
  if (retry_ms >= 0) until = std::min(until, now + std::chrono::milliseconds(retry_ms + 1));
  if (!w.watch) {
    // Watched only now, as the blocking acquire does: the wake-up that confirms the
    // subscription makes up for a message published before it took effect.
    const std::uint64_t id = w.id;
    try {
      w.watch = w.subscriber->watch(LockKeys::of(w.request.key).channel, w.plan.entry,
                                    [this, id](bool) { inbox_.notify(id); });
    } catch (const Error&) {
      // No subscriber to be had (descriptor limit): polling alone.
    }
  }
  if (w.woken) {
    attempt(w, now);
    return;
  }
  schedule(w, until);
}

void AsyncWaits::fire(Wait& w, Clock::time_point now) {
  schedule(w, std::nullopt);
  if (now >= w.request.deadline) {
    withdraw(w, now);
    return;
  }
  attempt(w, now);
}

void AsyncWaits::stopped(std::uint64_t id, Clock::time_point now) {
  const auto it = waits_.find(id);
  if (it == waits_.end()) return;
  Wait& w = *it->second;
  w.stop_requested = true;
  if (w.on_wire) return;  // its answer decides (attempt_answered, failed)
  if (!w.asked) {
    tell(it, std::nullopt, nullptr);  // nothing was asked: nothing to withdraw
    return;
  }
  withdraw(w, now);
}

void AsyncWaits::woken(std::uint64_t id, Clock::time_point now) {
  const auto it = waits_.find(id);
  if (it == waits_.end()) return;
  Wait& w = *it->second;
  if (w.withdrawing || w.stop_requested) return;
  if (w.on_wire) {
    w.woken = true;  // the answer under way may predate the news
    return;
  }
  if (w.timer) attempt(w, now);
}

void AsyncWaits::failed(Waits::iterator it, const Error& why) {
  if (it == waits_.end()) return;
  Wait& w = *it->second;
  w.on_wire = false;
  const auto now = Clock::now();
  // A wait that was cancelled, or ran out, ends as what it is: its entry lapses by its
  // own TTL (waiter_ttl), and a grant made for it by the lease's.
  if (w.withdrawing || w.stop_requested || (w.plan.waits && now >= w.request.deadline)) {
    tell(it, std::nullopt, nullptr);
    return;
  }
  const bool transient = why.code() == Errc::unavailable || why.code() == Errc::deadline_exceeded;
  const bool silent = why.code() == Errc::deadline_exceeded;
  // A connection that closed (CLIENT KILL, a timeout on the server's side) says nothing
  // of Redis itself: the wait asks again at once on a new one, as a blocking wait whose
  // line failed does, and that attempt says whether Redis can be reached.
  if (w.plan.waits && transient && !silent && !w.asked_again) {
    w.asked_again = true;
    attempt(w, now);
    return;
  }
  // Behind Sentinel a master that is gone is replaced within seconds: the wait asks
  // again until its deadline, as long as a silent attempt still ends by it.
  if (setup_.follows_failover && w.plan.waits && transient &&
      !(silent && now + setup_.op_timeout > w.request.deadline)) {
    schedule(w, std::min(w.request.deadline, now + w.poll.next_delay()));
    return;
  }
  tell(it, std::nullopt, std::make_exception_ptr(why));
}

void AsyncWaits::tell(Waits::iterator it, std::optional<core::Granted> granted,
                      std::exception_ptr error) {
  schedule(*it->second, std::nullopt);
  core::tell_and_forget(waits_, it, std::move(granted), error);  // its watch ends first
}

void AsyncWaits::fail_on_wire(const Error& why) {
  std::deque<OnWire> wire;
  wire.swap(on_wire_);
  std::vector<std::uint64_t> lost;  // the waits whose request went with the connection
  for (const OnWire& request : wire) {
    if (request.what == Sent::forget) continue;
    const auto it = waits_.find(request.id);
    if (it != waits_.end() && it->second->on_wire) lost.push_back(request.id);
  }
  // Asked again in the order they were first asked (their ids), not the order their last
  // looks happened to be written in, so that they queue again in the order they were in.
  std::sort(lost.begin(), lost.end());
  // A silent server would not answer a withdraw either (and its entry or grant lapses by
  // its own TTL); one that only closed the connection is reached again on a new one.
  if (why.code() != Errc::deadline_exceeded) {
    // Each lost request may have run with only its answer lost, or its grant be the one
    // a WAIT was about: whatever these waits hold or queued is given back first, ahead of
    // anything they ask next, as the blocking acquire does. Else a wait's next attempt
    // would find the lock held by its own grant and wait behind it until the grant's TTL.
    for (const std::uint64_t id : lost) {
      Wait& w = *waits_.at(id);
      send(w, w.withdraw_call(), Sent::forget, false, Clock::now());
    }
  }
  for (const std::uint64_t id : lost) {
    const auto it = waits_.find(id);
    if (it != waits_.end()) failed(it, why);
    if (inbox_.stopping()) return;
  }
}

void AsyncWaits::schedule(Wait& w, std::optional<Clock::time_point> at) {
  timers_.set(w.timer, w.id, at);
}

}  // namespace warden::engines::redis
