#include "engines/warden/revoke_listener.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/stoppable_sleep.h"
#include "engines/resp_client/backoff.h"
#include "engines/resp_client/connection.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/liveness.h"
#include "engines/resp_client/stop_waker.h"
#include "warden/error.h"

namespace warden::engines::wardend {
namespace {

// How often a quiet listener asks wardend whether the connection still carries anything.
constexpr auto kPingEvery = std::chrono::seconds(1);

}  // namespace

using resp_client::Reply;

RevokeListener::RevokeListener(std::shared_ptr<resp_client::Connector> connector,
                               std::chrono::milliseconds op_timeout, RetryPolicy retry,
                               OnRevoke on_revoke)
    : connector_(std::move(connector)),
      op_timeout_(op_timeout),
      retry_(retry),
      on_revoke_(std::move(on_revoke)),
      thread_([this](std::stop_token stop) { run(stop); }) {}

RevokeListener::~RevokeListener() {
  thread_.request_stop();
  thread_.join();
}

std::optional<RevokeListener::Ticket> RevokeListener::ticket() {
  std::unique_lock lock(mu_);
  first_try_.wait_for(lock, op_timeout_, [&] { return tried_; });
  return up_;
}

bool RevokeListener::current(const Ticket& ticket) const {
  std::lock_guard guard(mu_);
  return up_ && up_->generation == ticket.generation;
}

void RevokeListener::run(std::stop_token stop) {
  resp_client::Backoff backoff(retry_);
  const resp_client::StopWaker waker(stop);
  while (!stop.stop_requested()) {
    try {
      auto conn = connector_->connect();
      const std::uint64_t id = listen(*conn);
      {
        std::lock_guard guard(mu_);
        up_ = Ticket{id, ++generation_};
        tried_ = true;
      }
      first_try_.notify_all();
      backoff.reset();
      listen_until_broken(*conn, waker.fd(), stop);
      return;
    } catch (const Error&) {
      // The server went away, or refused us: reported below, then tried again later.
    }
    bool was_up = false;
    {
      std::lock_guard guard(mu_);
      was_up = up_.has_value();
      up_.reset();
      ++generation_;
      tried_ = true;
    }
    first_try_.notify_all();
    // Pushes may have been lost with the connection: every cached grant goes back.
    if (was_up) on_revoke_(core::Revoke{{}, 0, true});
    core::sleep_for(backoff.next_delay(), stop);
  }
}

void RevokeListener::listen_until_broken(resp_client::Connection& conn, int wake_fd,
                                         const std::stop_token& stop) {
  // The server never writes unasked except to revoke: without a PING now and then, a
  // connection dropped silently would look like a quiet one for ever while the client
  // serves its cache.
  resp_client::Liveness liveness(kPingEvery, op_timeout_);
  const std::string what = "REVOKES on " + connector_->endpoint();
  while (!stop.stop_requested()) {
    const auto until = liveness.check(conn, Clock::now(), what);
    conn.flush(Clock::now() + op_timeout_);
    if (auto reply = conn.poll_reply(until, wake_fd)) {
      const bool pong = resp_client::is_pong(*reply);
      liveness.heard(Clock::now(), pong);
      if (!pong) deliver(*reply);
    }
  }
}

std::uint64_t RevokeListener::listen(resp_client::Connection& conn) {
  const std::string_view args[] = {"REVOKES"};
  const Reply reply = conn.command(args, Clock::now() + op_timeout_);
  const std::string context = "REVOKES on " + connector_->endpoint();
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (reply.type != Reply::Type::integer || reply.integer < 0) {
    throw resp_client::unexpected_reply(reply, context);
  }
  return static_cast<std::uint64_t>(reply.integer);
}

void RevokeListener::deliver(const Reply& push) {
  // [REVOKE, "group/name", token]; anything else is not ours to act on.
  if (!push.is_array() || push.elements.size() != 3 || push.elements[0].text != "REVOKE" ||
      push.elements[2].type != Reply::Type::integer) {
    return;
  }
  const std::string& key = push.elements[1].text;
  const auto slash = key.find('/');
  if (slash == std::string::npos) return;
  on_revoke_(core::Revoke{core::LockKey{key.substr(0, slash), key.substr(slash + 1)},
                          static_cast<std::uint64_t>(push.elements[2].integer), false});
}

}  // namespace warden::engines::wardend
