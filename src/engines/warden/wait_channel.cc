#include "engines/warden/wait_channel.h"

#include <algorithm>
#include <charconv>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "engines/resp_client/backoff.h"
#include "engines/resp_client/errors.h"
#include "warden/error.h"

namespace warden::engines::wardend {
namespace {

using resp_client::Reply;

// How long a connection with waits on it may stay quiet before it is asked for a PONG.
constexpr auto kWaitsPingEvery = std::chrono::seconds(1);

Clock::time_point add_saturating(Clock::time_point t, Clock::duration d) {
  return t > Clock::time_point::max() - d ? Clock::time_point::max() : t + d;
}

}  // namespace

struct WaitChannel::Wait {
  Wait(core::AcquireRequest r, core::Engine::AcquireDone d, const RetryPolicy& retry)
      : request(std::move(r)), done(std::move(d)), embargo(retry) {}

  std::uint64_t id = 0;
  std::string tag;
  core::AcquireRequest request;
  core::Engine::AcquireDone done;  // empty once told: the wait is abandoned
  resp_client::Backoff embargo;    // between asks while the server is STARTING
  bool on_wire = false;            // asked, not yet answered
  bool waits = false;              // the ACQUIRE on the wire may park (not a try)
  bool withdrawing = false;        // WITHDRAW sent
  bool cancel_requested = false;
  Clock::time_point sent{};
  std::optional<Clock::time_point> timer;
  // Last: deregistered first when the wait is destroyed.
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

std::shared_ptr<WaitChannel> WaitChannel::start(std::shared_ptr<resp_client::Connector> connector,
                                                std::chrono::milliseconds op_timeout,
                                                RetryPolicy retry, GiveBack give_back) {
  std::shared_ptr<WaitChannel> channel(
      new WaitChannel(std::move(connector), op_timeout, retry, std::move(give_back)));
  // The thread holds the channel: it may outlive the engine when stop() runs on it.
  channel->inbox_.start([channel] { channel->run(); });
  return channel;
}

WaitChannel::WaitChannel(std::shared_ptr<resp_client::Connector> connector,
                         std::chrono::milliseconds op_timeout, RetryPolicy retry,
                         GiveBack give_back)
    : connector_(std::move(connector)),
      op_timeout_(op_timeout),
      retry_(retry),
      give_back_(std::move(give_back)),
      inbox_("warden://"),
      liveness_(kWaitsPingEvery, op_timeout) {}

WaitChannel::~WaitChannel() = default;

void WaitChannel::acquire(core::AcquireRequest request, core::Engine::AcquireDone done) {
  inbox_.submit(std::make_unique<Wait>(std::move(request), std::move(done), retry_));
}

void WaitChannel::stop() { inbox_.stop(); }

void WaitChannel::run() {
  while (!stopping()) {
    try {
      turn();
    } catch (const Error& e) {
      // The connection broke (or the server spoke something else): the server drops a
      // closed connection's waiters, so each wait on it is over.
      conn_.reset();
      fail_all(e);
    }
  }
  conn_.reset();
  timers_.clear();
  inbox_.close(waits_);
}

void WaitChannel::turn() {
  auto taken = inbox_.take();
  auto now = Clock::now();
  std::vector<Wait*> to_send;
  to_send.reserve(taken.arrived.size());
  for (auto& wait : taken.arrived) {  // kept first, so that a failure below tells them
    wait->tag = std::to_string(wait->id);
    to_send.push_back(wait.get());
    const std::uint64_t id = wait->id;
    waits_.emplace(id, std::move(wait));
  }
  if (!to_send.empty() && (!conn_ || (on_wire_ == 0 && !conn_->reusable()))) open();
  for (Wait* w : to_send) send(*w, now);
  for (const std::uint64_t id : taken.cancelled) {
    cancelled(id, now);
    if (stopping()) return;
  }
  while (!timers_.empty() && timers_.begin()->first <= now) {
    const std::uint64_t id = timers_.begin()->second;
    fire(*waits_.at(id), now);
    if (stopping()) return;
  }

  // A connection with waits on it that stays quiet is asked for a PONG: none within
  // op_timeout means it was dropped silently (a partition, a host that vanished).
  auto until = timers_.empty() ? Clock::time_point::max() : timers_.begin()->first;
  if (on_wire_ > 0 && conn_) {
    until = std::min(until,
                     liveness_.check(*conn_, now, "warden:// waits on " + connector_->endpoint()));
  } else {
    liveness_.reset();
  }
  if (conn_) conn_->flush(now + op_timeout_);
  if (!conn_) {
    inbox_.sleep_until(until);
    return;
  }
  auto reply = conn_->poll_reply(until, inbox_.wake_fd());
  while (reply) {
    const bool pong = resp_client::is_pong(*reply);
    liveness_.heard(Clock::now(), pong);  // the connection carries replies
    if (!pong) deliver(*reply);
    if (stopping() || !conn_) return;
    reply = conn_->poll_reply(Clock::now());
  }
}

void WaitChannel::open() {
  conn_.reset();
  conn_ = connector_->connect();
  const std::string_view args[] = {"WAITS"};
  const Reply reply = conn_->command(args, Clock::now() + op_timeout_);
  const std::string context = "WAITS on " + connector_->endpoint();
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (reply.type != Reply::Type::status || reply.text != "OK") {
    throw resp_client::unexpected_reply(reply, context);
  }
  liveness_.reset();
}

void WaitChannel::send(Wait& w, Clock::time_point now) {
  AcquireCommand command = acquire_command(w.request, now);
  command.command.emplace_back("TAG");
  command.command.push_back(w.tag);
  conn_->append(std::span<const std::string>(command.command));
  w.on_wire = true;
  ++on_wire_;
  w.waits = command.waits;
  w.sent = now;
  // A try is answered at once: op_timeout bounds it. A wait is answered at its deadline
  // by the server; half of op_timeout later the client withdraws it itself.
  if (!w.waits) {
    schedule(w, now + op_timeout_);
  } else if (w.request.deadline == Clock::time_point::max()) {
    schedule(w, std::nullopt);
  } else {
    schedule(w, add_saturating(w.request.deadline, op_timeout_ / 2));
  }
}

void WaitChannel::withdraw(Wait& w, Clock::time_point now) {
  if (w.withdrawing) return;
  const std::string_view args[] = {"WITHDRAW", w.tag};
  conn_->append(std::span<const std::string_view>(args));
  w.withdrawing = true;
  schedule(w, now + op_timeout_);  // the server's last word, or none: see fire()
}

void WaitChannel::cancelled(std::uint64_t id, Clock::time_point now) {
  const auto it = waits_.find(id);
  if (it == waits_.end() || !it->second->done) return;  // told already
  Wait& w = *it->second;
  w.cancel_requested = true;
  if (!w.on_wire) {
    tell(it, std::nullopt, nullptr);  // between asks (STARTING): nothing to withdraw
    return;
  }
  withdraw(w, now);
}

void WaitChannel::fire(Wait& w, Clock::time_point now) {
  const auto it = waits_.find(w.id);
  schedule(w, std::nullopt);
  if (!w.on_wire) {  // the restart embargo's pause is over
    if (now >= w.request.deadline) {
      tell(it, std::nullopt, nullptr);
      return;
    }
    if (!conn_ || (on_wire_ == 0 && !conn_->reusable())) open();
    send(w, now);
    return;
  }
  if (!w.waits && !w.withdrawing) {
    // A try unanswered within op_timeout: the error a blocking try gets; its late
    // answer, should a grant come, is given back.
    tell(it, std::nullopt,
         std::make_exception_ptr(
             Error(Errc::deadline_exceeded,
                   "ACQUIRE on " + connector_->endpoint() + ": no answer within op_timeout")),
         true);
    return;
  }
  if (!w.withdrawing) {
    withdraw(w, now);  // the deadline passed and the server has not said so
    return;
  }
  // The withdrawal went unanswered (a frozen or cut-off server): the wait ends as the
  // timed-out or cancelled one it is; a grant that comes later is given back.
  tell(it, std::nullopt, nullptr, true);
}

void WaitChannel::deliver(const Reply& reply) {
  const std::string context = "WAITS on " + connector_->endpoint();
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (!reply.is_array() || reply.elements.size() != 2 ||
      reply.elements[0].type != Reply::Type::bulk) {
    throw resp_client::unexpected_reply(reply, context);
  }
  const std::string& tag = reply.elements[0].text;
  std::uint64_t id = 0;
  std::from_chars(tag.data(), tag.data() + tag.size(), id);
  const auto it = waits_.find(id);
  if (it == waits_.end()) throw resp_client::unexpected_reply(reply, context + " (unknown tag)");
  answered(it, reply.elements[1]);
}

void WaitChannel::answered(Waits::iterator it, const Reply& inner) {
  Wait& w = *it->second;
  w.on_wire = false;
  --on_wire_;
  w.withdrawing = false;
  schedule(w, std::nullopt);
  const std::string context = "ACQUIRE on " + connector_->endpoint();

  if (is_starting(inner) && w.done) {
    // The restart embargo: a try is simply not granted; a wait asks again later.
    if (!w.waits || w.cancel_requested) {
      tell(it, std::nullopt, nullptr);
      return;
    }
    schedule(w, std::min(Clock::now() + w.embargo.next_delay(), w.request.deadline));
    return;
  }
  // The server no longer takes this connection as authenticated (its user was removed):
  // the waits on it go on, new ones go on a new connection.
  if (inner.error_code() == "NOAUTH" && conn_) conn_->retire();
  std::optional<GrantReply> grant;
  try {
    grant = parse_acquire(inner, context);
  } catch (...) {
    if (!w.done) {
      waits_.erase(it);
      return;
    }
    tell(it, std::nullopt, std::current_exception());
    return;
  }
  if (!grant) {
    if (!w.done) {
      waits_.erase(it);
      return;
    }
    tell(it, std::nullopt, nullptr);
    return;
  }
  core::GrantRef ref{w.request.key,         w.request.mode, grant->token,
                     w.request.options.ttl, grant->secret,  w.request.permits};
  if (!w.done || w.cancel_requested) {
    // Granted after all, to a wait nobody waits for any more: give it back.
    const bool abandoned = !w.done;
    if (abandoned) waits_.erase(it);
    give_back(ref);
    if (!abandoned) tell(it, std::nullopt, nullptr);
    return;
  }
  const auto expires = w.sent + grant->waited + w.request.options.ttl;
  tell(it, core::Granted{std::move(ref), expires}, nullptr);
}

void WaitChannel::tell(Waits::iterator it, std::optional<core::Granted> granted,
                       std::exception_ptr error, bool keep) {
  Wait& w = *it->second;
  auto done = std::move(w.done);
  w.done = nullptr;
  if (keep) {
    schedule(w, std::nullopt);
  } else {
    schedule(w, std::nullopt);
    if (w.on_wire) --on_wire_;
    waits_.erase(it);
  }
  // The last reference to the Client may go with `done`: the engine, and stop(), with it.
  done(std::move(granted), error);
}

void WaitChannel::fail_all(const Error& why) {
  timers_.clear();
  on_wire_ = 0;
  liveness_.reset();
  Waits all;
  all.swap(waits_);
  for (auto& [id, wait] : all) {
    if (!wait->done) continue;
    auto done = std::move(wait->done);
    wait.reset();
    done(std::nullopt, std::make_exception_ptr(why));
  }
}

void WaitChannel::give_back(const core::GrantRef& grant) {
  if (stopping()) return;  // the engine may be gone: the grant ends by its TTL
  give_back_(grant);
}

void WaitChannel::schedule(Wait& w, std::optional<Clock::time_point> at) {
  if (w.timer) timers_.erase({*w.timer, w.id});
  w.timer = at;
  if (at) timers_.emplace(*at, w.id);
}

}  // namespace warden::engines::wardend
