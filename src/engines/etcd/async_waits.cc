#include "engines/etcd/async_waits.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "engines/etcd/request_txns.h"
#include "engines/resp_client/backoff.h"
#include "warden/error.h"

namespace warden::engines::etcd {
namespace {

// The most Txns one Client's waits have in flight at once; the rest wait their turn, in
// the order sent. Enough to keep a cluster busy; it bounds what a burst of waits costs in
// gRPC calls under way (each its context, buffers and HTTP/2 stream).
constexpr int kCallsInFlight = 64;

// The code of the warden::Error in `error`; nullopt for another kind.
std::optional<Errc> code_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.code();
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

struct AsyncWaits::Wait {
  enum class Step {
    session,   // waiting for a session to be granted
    creating,  // the create is in flight
    looking,   // a look is in flight
    polling,   // a poll (request_txns.h, recheck) is in flight
    watching,  // sleeping until the watch fires, the next poll or the deadline
    pausing,   // a look went unanswered: sleeping until the next one
  };

  Wait(core::AcquireRequest r, LockKeys k, core::Engine::AcquireDone d, const RetryPolicy& retry)
      : request(std::move(r)), keys(std::move(k)), done(std::move(d)), poll(retry) {}

  std::uint64_t id = 0;
  core::AcquireRequest request;
  LockKeys keys;
  core::Engine::AcquireDone done;
  resp_client::Backoff poll;
  Clock::time_point bound;  // the latest its looks may end: op_timeout past its deadline

  Step step = Step::session;
  std::shared_ptr<const Session> session;
  std::string key;  // its request's key, while it may exist
  std::uint32_t slot = 0;
  std::int64_t revision = 0;  // the key's create_revision, once created
  int attempt = 0;            // sessions lost so far
  std::uint64_t call = 0;     // the number of the latest call; older answers are dropped
  std::uint64_t watch = 0;    // the hub's watch while watching
  std::string watched;        // the one key it watches (empty: a semaphore's range)
  bool in_flight = false;     // a create or a look is in flight
  bool told = false;          // told already; forgotten once its call in flight answers

  std::optional<Clock::time_point> timer;
  // Last: deregistered first when the wait is destroyed (core/wait_inbox.h).
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

std::shared_ptr<AsyncWaits> AsyncWaits::start(Host& host, EtcdRpc& rpc, const EtcdConfig& config,
                                              std::string client_id) {
  std::shared_ptr<AsyncWaits> waits(new AsyncWaits(host, rpc, config, std::move(client_id)));
  // The thread holds the object: it may outlive the engine when stop() runs on it, and
  // gRPC's completions hold it until each is called.
  waits->inbox_.start([waits] { waits->run(); });
  return waits;
}

AsyncWaits::AsyncWaits(Host& host, EtcdRpc& rpc, const EtcdConfig& config,
                       std::string client_id)
    : host_(host),
      rpc_(rpc),
      config_(config),
      client_id_(std::move(client_id)),
      inbox_("etcd://"),
      hub_(std::make_unique<WatchHub>(rpc)) {}

AsyncWaits::~AsyncWaits() = default;

void AsyncWaits::acquire(core::AcquireRequest request, LockKeys keys,
                         core::Engine::AcquireDone done) {
  inbox_.submit(
      std::make_unique<Wait>(std::move(request), std::move(keys), std::move(done), config_.retry));
}

void AsyncWaits::session_opened(std::chrono::milliseconds ttl, std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    opened_.push_back(Opened{ttl, std::move(error)});
  }
  inbox_.wake();
}

void AsyncWaits::stop() {
  inbox_.stop();
  // The thread has ended, or this is the thread itself, which touches the hub no more:
  // its stream ends now, while the engine's EtcdRpc it uses is still there.
  hub_.reset();
}

void AsyncWaits::run() {
  while (!inbox_.stopping()) turn();
  timers_.clear();
  {
    std::lock_guard lock(mu_);
    answers_.clear();
    opened_.clear();
  }
  inbox_.close(waits_);
}

void AsyncWaits::turn() {
  auto taken = inbox_.take();
  const auto now = Clock::now();
  std::vector<Answer> answers;
  std::vector<Opened> opened_now;
  {
    std::lock_guard lock(mu_);
    answers.swap(answers_);
    opened_now.swap(opened_);
  }
  const std::vector<std::uint64_t> fresh = core::WaitInbox<Wait>::admit(taken, waits_);
  // Each step may tell a wait, and the last reference to the Client (the engine, and
  // this object's host) may go with what it is told: nothing more once stopping.
  for (const std::uint64_t id : taken.cancelled) {
    if (const auto it = waits_.find(id); it != waits_.end()) cancelled(it);
    if (inbox_.stopping()) return;
  }
  for (const std::uint64_t id : fresh) {
    if (const auto it = waits_.find(id); it != waits_.end() && !it->second->told) {
      Wait& w = *it->second;
      const auto from = std::max(w.request.deadline, now);
      w.bound = from > Clock::time_point::max() - config_.op_timeout ? Clock::time_point::max()
                                                                     : from + config_.op_timeout;
      join(it, now);
    }
    if (inbox_.stopping()) return;
  }
  for (const Opened& o : opened_now) {
    opened(o, now);
    if (inbox_.stopping()) return;
  }
  for (Answer& answer : answers) {
    answered(std::move(answer), now);
    if (inbox_.stopping()) return;
  }
  pump();  // the calls that waited for those answered
  if (inbox_.stopping()) return;
  for (const std::uint64_t id : taken.woken) {
    if (const auto it = waits_.find(id); it != waits_.end()) woken(it);
    if (inbox_.stopping()) return;
  }
  while (const auto id = timers_.due(Clock::now())) {
    fire(waits_.find(*id), Clock::now());
    if (inbox_.stopping()) return;
  }
  if (Clock::now() >= next_probe_) {
    hub_->probe(config_.op_timeout);
    next_probe_ = Clock::now() + config_.op_timeout / 2;
  }
  inbox_.sleep_until(std::min(timers_.next(), next_probe_));
}

void AsyncWaits::join(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  w.step = Wait::Step::session;
  w.session = host_.join_session(w.request.options.ttl);
  if (!w.session) {
    // Until its deadline (a try's: now) for the session, as long as it takes to grant.
    schedule(w, w.request.deadline > now ? std::optional(w.request.deadline) : std::nullopt);
    host_.open_session(w.request.options.ttl);
    return;
  }
  w.key = host_.take_key(w.request, w.keys, w.slot);
  send_create(w);
}

void AsyncWaits::send_create(Wait& w) {
  w.step = Wait::Step::creating;
  // Told at its deadline; its key is withdrawn once the create has answered (whether it
  // made the key). A try (a deadline already past) asks once and waits for the answer.
  schedule_deadline(w);
  send(w.id, ++w.call, create_txn(w.request, w.keys, w.key, client_id_, w.session->lease),
       Clock::time_point::max());
}

void AsyncWaits::look(Wait& w) {
  w.step = Wait::Step::looking;
  schedule_deadline(w);
  send(w.id, ++w.call, look_txn(w.request, w.keys, w.key, w.revision), w.bound);
}

void AsyncWaits::poll(Wait& w) {
  w.step = Wait::Step::polling;
  schedule_deadline(w);
  send(w.id, ++w.call, recheck_txn(w.key, w.watched), w.bound);
}

void AsyncWaits::send(std::uint64_t id, std::uint64_t call, etcdserverpb::TxnRequest txn,
                      Clock::time_point until) {
  if (call != 0) waits_.at(id)->in_flight = true;
  outbox_.push_back(Outgoing{id, call, std::move(txn), until});
  pump();
}

void AsyncWaits::pump() {
  while (calls_in_flight_ < kCallsInFlight && !outbox_.empty()) {
    Outgoing next = std::move(outbox_.front());
    outbox_.pop_front();
    if (next.call != 0) {
      const auto it = waits_.find(next.id);
      if (it == waits_.end() || it->second->call != next.call) continue;
      if (it->second->told) {  // ended while its call waited here: not sent at all
        it->second->in_flight = false;
        end(it, std::nullopt, nullptr);
        continue;
      }
    }
    ++calls_in_flight_;
    std::weak_ptr<AsyncWaits> weak = weak_from_this();
    rpc_.txn_async(std::move(next.txn), next.until,
                   [weak, id = next.id, call = next.call](etcdserverpb::TxnResponse response,
                                                          std::exception_ptr error) {
                     const auto self = weak.lock();
                     if (!self) return;
                     {
                       std::lock_guard lock(self->mu_);
                       self->answers_.push_back(Answer{id, call, std::move(response), error});
                     }
                     self->inbox_.wake();
                   });
  }
}

void AsyncWaits::answered(Answer answer, Clock::time_point now) {
  --calls_in_flight_;
  if (answer.call == 0) {
    const auto found = withdrawals_.find(answer.id);
    if (found == withdrawals_.end()) return;
    const Withdrawal withdrawal = std::move(found->second);
    withdrawals_.erase(found);
    host_.withdrawn(withdrawal.session, withdrawal.keys, withdrawal.key, withdrawal.slot,
                    answer.error == nullptr);
    return;
  }
  const auto it = waits_.find(answer.id);
  if (it == waits_.end() || it->second->call != answer.call) return;
  Wait& w = *it->second;
  w.in_flight = false;
  if (w.told) {  // ran out or was cancelled meanwhile
    end(it, std::nullopt, nullptr);
    return;
  }
  if (w.step == Wait::Step::creating) {
    created(it, answer, now);
  } else if (w.step == Wait::Step::polling) {
    polled(it, answer, now);
  } else {
    seen(it, answer, now);
  }
}

void AsyncWaits::created(Waits::iterator it, const Answer& answer, Clock::time_point now) {
  Wait& w = *it->second;
  if (answer.error) {
    // "requested lease not found": the session expired before the keeper noticed; it
    // queues again on a new one, as the blocking acquire does.
    if (code_of(answer.error) == Errc::lost && w.attempt < kSessionRetries) {
      host_.lose(w.session->lease);
      withdraw(w);  // the create may have happened
      ++w.attempt;
      join(it, now);
      return;
    }
    end(it, std::nullopt, answer.error);
    return;
  }
  Created made;
  try {
    made = created_from(answer.response, w.request, w.keys, w.key);
  } catch (...) {
    end(it, std::nullopt, std::current_exception());
    return;
  }
  w.revision = made.revision;
  if (made.free) {
    try_grant(it, now);
  } else if (now >= w.request.deadline) {  // a try on a busy lock
    end(it, std::nullopt, nullptr);
  } else {
    look(w);
  }
}

void AsyncWaits::unanswered(Waits::iterator it, const Answer& answer, Clock::time_point now) {
  Wait& w = *it->second;
  if (now >= w.request.deadline) {
    end(it, std::nullopt, nullptr);
    return;
  }
  // No answer within op_timeout on any member while the wait has time left: its place
  // is its key, which lives as long as its lease; it looks again after a pause (the
  // blocking wait's rule).
  const auto code = code_of(answer.error);
  if (!code || !worth_looking_again(*code)) {
    end(it, std::nullopt, answer.error);
    return;
  }
  w.step = Wait::Step::pausing;
  schedule(w, std::min(w.request.deadline, now + w.poll.next_delay()));
}

void AsyncWaits::polled(Waits::iterator it, const Answer& answer, Clock::time_point now) {
  Wait& w = *it->second;
  if (answer.error) {
    unanswered(it, answer, now);
    return;
  }
  Recheck seen;
  try {
    seen = rechecked(answer.response, w.revision);
  } catch (...) {
    end(it, std::nullopt, std::current_exception());
    return;
  }
  if (seen.gone) {
    session_lost(it, now);
  } else if (!seen.blocked) {
    look(w);
  } else if (now >= w.request.deadline) {
    end(it, std::nullopt, nullptr);
  } else {
    watch(w, w.watched, {}, seen.revision, now);
  }
}

void AsyncWaits::watch(Wait& w, const std::string& key, const std::string& range_end,
                       std::int64_t revision, Clock::time_point now) {
  w.step = Wait::Step::watching;
  w.watched = range_end.empty() ? key : std::string();
  const std::uint64_t id = w.id;
  // `this` outlives the hub, its member, which calls no `fired` once gone: a capture
  // that small is kept inside the std::function, not on the heap, for every watch.
  w.watch = hub_->watch_delete(key, range_end, revision + 1, [this, id] { inbox_.notify(id); });
  schedule(w, std::min(w.request.deadline, now + poll_delay(w)));
}

void AsyncWaits::seen(Waits::iterator it, const Answer& answer, Clock::time_point now) {
  Wait& w = *it->second;
  if (answer.error) {
    unanswered(it, answer, now);
    return;
  }
  Look seen;
  try {
    seen = looked(answer.response, w.request, w.keys, w.revision);
  } catch (...) {
    end(it, std::nullopt, std::current_exception());
    return;
  }
  if (seen.gone) {
    session_lost(it, now);
  } else if (seen.holds) {
    try_grant(it, now);
  } else if (now >= w.request.deadline) {
    end(it, std::nullopt, nullptr);
  } else {
    watch(w, seen.watch, seen.range_end, seen.revision, now);
  }
}

void AsyncWaits::try_grant(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  bool lost = false;
  auto granted = host_.grant_key(w.request, w.key, w.revision, *w.session, lost);
  if (!granted) {
    session_lost(it, now);
    return;
  }
  w.session.reset();  // the key is the grant's now
  w.key.clear();
  end(it, std::move(granted), nullptr);
}

void AsyncWaits::session_lost(Waits::iterator it, Clock::time_point now) {
  Wait& w = *it->second;
  host_.lose(w.session->lease);
  withdraw(w);  // the key went with the lease, or may have
  if (now >= w.request.deadline) {
    end(it, std::nullopt, nullptr);
  } else if (w.attempt >= kSessionRetries) {
    end(it, std::nullopt,
        std::make_exception_ptr(Error(Errc::unavailable,
                                      "etcd: every session of this client was lost while "
                                      "acquiring " +
                                          w.request.key.joined())));
  } else {
    ++w.attempt;
    join(it, now);
  }
}

void AsyncWaits::opened(const Opened& opened, Clock::time_point now) {
  // In the order asked.
  std::vector<std::uint64_t> ids;
  for (const auto& [id, wait] : waits_) {
    if (wait->step == Wait::Step::session && !wait->told &&
        wait->request.options.ttl == opened.ttl) {
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  for (const std::uint64_t id : ids) {
    const auto it = waits_.find(id);
    if (it == waits_.end()) continue;
    if (opened.error) {
      end(it, std::nullopt, opened.error);
    } else {
      join(it, now);
    }
    if (inbox_.stopping()) return;
  }
}

void AsyncWaits::fire(Waits::iterator it, Clock::time_point now) {
  if (it == waits_.end()) return;
  Wait& w = *it->second;
  schedule(w, std::nullopt);
  switch (w.step) {
    case Wait::Step::session:
    case Wait::Step::creating:
    case Wait::Step::looking:
    case Wait::Step::polling:
      // Its deadline: told now; a call in flight is answered first.
      end(it, std::nullopt, nullptr);
      return;
    case Wait::Step::watching:
    case Wait::Step::pausing:
      unwatch(w);
      if (now >= w.request.deadline) {
        end(it, std::nullopt, nullptr);
      } else if (w.step == Wait::Step::watching && !w.watched.empty()) {
        poll(w);  // whether the key it watches is still in its way
      } else {
        look(w);  // a semaphore's poll, or the pause after a look unanswered
      }
      return;
  }
}

void AsyncWaits::woken(Waits::iterator it) {
  Wait& w = *it->second;
  if (w.step != Wait::Step::watching || w.told) return;  // a late event of an older watch
  w.watch = 0;  // fired: gone from the hub
  look(w);
}

void AsyncWaits::cancelled(Waits::iterator it) {
  if (it->second->told) return;
  end(it, std::nullopt, nullptr);
}

void AsyncWaits::withdraw(Wait& w) {
  if (!w.session) return;
  const std::uint64_t id = ++next_withdrawal_;
  withdrawals_.emplace(id, Withdrawal{std::move(w.session), w.keys, std::move(w.key), w.slot});
  w.session.reset();
  w.key.clear();
  etcdserverpb::TxnRequest txn;
  txn.add_success()->mutable_request_delete_range()->set_key(withdrawals_.at(id).key);
  send(id, 0, std::move(txn), Clock::now() + config_.op_timeout);
}

void AsyncWaits::tell(Waits::iterator it, std::optional<core::Granted> granted,
                      std::exception_ptr error) {
  Wait& w = *it->second;
  w.told = true;
  schedule(w, std::nullopt);
  unwatch(w);
  auto done = std::move(w.done);
  done(std::move(granted), error);
}

void AsyncWaits::end(Waits::iterator it, std::optional<core::Granted> granted,
                     std::exception_ptr error) {
  Wait& w = *it->second;
  if (w.in_flight) {  // its answer withdraws the key, then forgets it
    if (!w.told) tell(it, std::move(granted), error);
    return;
  }
  schedule(w, std::nullopt);
  unwatch(w);
  withdraw(w);
  if (w.told) {
    waits_.erase(it);
    return;
  }
  core::tell_and_forget(waits_, it, std::move(granted), error);
}

void AsyncWaits::schedule(Wait& w, std::optional<Clock::time_point> at) {
  timers_.set(w.timer, w.id, at);
}

// The stream's probe stands for the blocking wait's frequent polls (a stuck watch is a
// stuck stream), so a watching wait polls at most every op_timeout: with thousands
// waiting, their polls were most of etcd's work.
Clock::duration AsyncWaits::poll_delay(Wait& w) const {
  return std::max<Clock::duration>(w.poll.next_delay(), config_.op_timeout);
}

void AsyncWaits::schedule_deadline(Wait& w) {
  const bool ahead = w.request.deadline != Clock::time_point::max() && w.request.deadline > Clock::now();
  schedule(w, ahead ? std::optional(w.request.deadline) : std::nullopt);
}

void AsyncWaits::unwatch(Wait& w) {
  if (w.watch == 0) return;
  hub_->unwatch(w.watch);
  w.watch = 0;
}

}  // namespace warden::engines::etcd
