#include "engines/redis/subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "engines/resp_client/connector.h"
#include "warden/error.h"

namespace warden::engines::redis {
namespace {

using resp_client::Backoff;
using resp_client::Connection;
using resp_client::Reply;

// How long one read waits before the thread looks at its orders again; orders also
// wake it at once through the eventfd, so this only bounds a missed notification.
constexpr auto kReadSlice = std::chrono::seconds(1);
constexpr auto kPingEvery = std::chrono::seconds(1);

// true if `entry` is one of the space-separated words of `payload`.
bool names(std::string_view payload, std::string_view entry) {
  while (!payload.empty()) {
    const auto space = payload.find(' ');
    if (payload.substr(0, space) == entry) return true;
    if (space == std::string_view::npos) break;
    payload.remove_prefix(space + 1);
  }
  return false;
}

}  // namespace

Subscriber::Watch::Watch(Subscriber* owner, std::string channel, std::string entry,
                         std::function<void(bool)> on_wake)
    : owner_(owner),
      channel_(std::move(channel)),
      entry_(std::move(entry)),
      on_wake_(std::move(on_wake)) {}

Subscriber::Watch::~Watch() { owner_->unwatch(this); }

void Subscriber::Watch::wake(bool by_message) {
  {
    std::lock_guard lock(mu_);
    ++wakes_;
    if (by_message) ++messages_;
  }
  cv_.notify_all();
  if (on_wake_) on_wake_(by_message);
}

bool Subscriber::Watch::subscribed() const {
  std::lock_guard lock(owner_->mu_);
  return owner_->confirmed_.contains(channel_);
}

Subscriber::Watch::Woken Subscriber::Watch::wait_why(Clock::time_point until,
                                                     const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, stop, until, [&] { return wakes_ != seen_; })) return Woken::no;
  const bool message = messages_ != seen_messages_;
  seen_ = wakes_;
  seen_messages_ = messages_;
  return message ? Woken::by_message : Woken::to_look;
}

Subscriber::Subscriber(resp_client::ConnectOptions options, const RetryPolicy& retry,
                       std::shared_ptr<const resp_client::TlsContext> tls)
    : options_(std::move(options)),
      retry_(retry),
      tls_(std::move(tls)),
      liveness_(kPingEvery, options_.timeout) {
  // Without an eventfd (descriptor limit) the thread notices orders within kReadSlice.
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Subscriber::~Subscriber() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  notify_thread();
  if (thread_.joinable()) thread_.join();
  if (event_fd_ >= 0) ::close(event_fd_);
}

std::unique_ptr<Subscriber::Watch> Subscriber::watch(const std::string& channel,
                                                     const std::string& entry,
                                                     std::function<void(bool)> on_wake) {
  std::unique_ptr<Watch> watch(new Watch(this, channel, entry, std::move(on_wake)));
  {
    std::lock_guard lock(mu_);
    auto [it, fresh] = channels_.try_emplace(channel);
    it->second.push_back(watch.get());
    if (fresh) orders_.push_back(Order{true, channel});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  notify_thread();
  return watch;
}

void Subscriber::unwatch(Watch* watch) {
  {
    std::lock_guard lock(mu_);
    const auto it = channels_.find(watch->channel_);
    if (it == channels_.end()) return;
    auto& watches = it->second;
    watches.erase(std::remove(watches.begin(), watches.end(), watch), watches.end());
    if (!watches.empty()) return;
    channels_.erase(it);
    confirmed_.erase(watch->channel_);
    orders_.push_back(Order{false, watch->channel_});
  }
  notify_thread();
}

void Subscriber::notify_thread() {
  if (event_fd_ < 0) return;
  const std::uint64_t one = 1;
  // A full counter (never in practice) still leaves the fd readable: nothing is lost.
  [[maybe_unused]] const auto n = ::write(event_fd_, &one, sizeof one);
}

void Subscriber::sleep_for_notification(Clock::duration delay) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(delay).count();
  if (event_fd_ < 0) {
    std::this_thread::sleep_for(std::min<Clock::duration>(delay, kReadSlice));
    return;
  }
  pollfd fd{event_fd_, POLLIN, 0};
  ::poll(&fd, 1, static_cast<int>(std::clamp<std::int64_t>(ms, 0, 60'000)));
  std::uint64_t count = 0;
  [[maybe_unused]] const auto n = ::read(event_fd_, &count, sizeof count);
}

void Subscriber::run() {
  std::unique_ptr<Connection> conn;
  Backoff backoff(retry_);
  while (true) {
    std::vector<Order> orders;
    bool anyone = false;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      orders.swap(orders_);
      anyone = !channels_.empty();
    }
    // Behind Sentinel, a connection to a master that moved hears nothing of the new one.
    if (conn && !resp_client::still_current(*conn, options_)) {
      conn.reset();
      lose_subscriptions();
    }
    if (!conn) {
      // Nobody waits: no connection; sleep until an order comes.
      if (!anyone) {
        sleep_for_notification(kReadSlice);
        continue;
      }
      try {
        conn = resp_client::open_connection(options_, tls_);
        backoff.reset();
        liveness_.reset();
      } catch (const Error&) {
        // Waiters poll meanwhile; orders are not lost: a fresh connection subscribes
        // to every channel watched at that time.
        sleep_for_notification(backoff.next_delay());
        continue;
      }
      std::lock_guard lock(mu_);
      orders.clear();
      unacknowledged_.clear();
      for (const auto& [name, watches] : channels_) orders.push_back(Order{true, name});
    }
    try {
      exchange(*conn, std::move(orders));
    } catch (const Error&) {
      // Whatever was published until the reconnect is lost: each waiter looks again
      // when its channel's subscription is confirmed, and polls until then.
      conn.reset();
      lose_subscriptions();
    }
  }
}

void Subscriber::exchange(Connection& conn, std::vector<Order> orders) {
  if (!orders.empty()) {
    {
      std::lock_guard lock(mu_);
      for (const Order& order : orders) {
        if (order.subscribe) ++unacknowledged_[order.channel];
      }
    }
    for (const Order& order : orders) {
      const std::string_view args[] = {order.subscribe ? "SSUBSCRIBE" : "SUNSUBSCRIBE",
                                       order.channel};
      conn.append(std::span<const std::string_view>(args));
    }
    conn.flush(Clock::now() + options_.timeout);
  }
  // Only published messages come unasked: PING now and then tells a quiet connection
  // from one dropped silently. In subscribed mode Redis answers ["pong", ""] (handle()).
  const auto now = Clock::now();
  const auto until = liveness_.check(conn, now, "redis subscriber");
  conn.flush(now + options_.timeout);
  auto reply = conn.poll_reply(std::min(now + kReadSlice, until), event_fd_);
  if (!reply) {
    sleep_for_notification(Clock::duration::zero());  // clears the notification
    return;
  }
  handle(*reply);
  // Whatever else has arrived, without waiting.
  while (auto more = conn.poll_reply(Clock::now())) handle(*more);
}

void Subscriber::lose_subscriptions() {
  std::lock_guard lock(mu_);
  confirmed_.clear();
}

void Subscriber::handle(const Reply& reply) {
  const bool pong =
      (reply.is_array() && reply.elements.size() == 2 && reply.elements[0].text == "pong") ||
      resp_client::is_pong(reply);
  liveness_.heard(Clock::now(), pong);
  if (pong) return;
  if (!reply.is_array() || reply.elements.size() < 3) return;
  const std::string& kind = reply.elements[0].text;
  const std::string& channel = reply.elements[1].text;
  std::lock_guard lock(mu_);
  if (kind == "ssubscribe") {
    const auto pending = unacknowledged_.find(channel);
    if (pending != unacknowledged_.end()) {
      if (--pending->second > 0) return;
      unacknowledged_.erase(pending);
    }
    // Subscribed: what was published before was not seen, so each waiter looks once.
    const auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    confirmed_.insert(channel);
    for (Watch* watch : it->second) watch->wake(false);
  } else if (kind == "sunsubscribe") {
    // Not asked for (this Subscriber unsubscribes only channels nobody watches, and a
    // channel watched again has its SSUBSCRIBE pending): Redis 7 says so when the
    // channel's slot left this node. Nothing more is heard here, so each watch looks, as
    // after a reconnect, and finds the lock where it is now.
    const auto it = channels_.find(channel);
    if (it == channels_.end() || unacknowledged_.contains(channel)) return;
    confirmed_.erase(channel);
    for (Watch* watch : it->second) watch->wake(false);
  } else if (kind == "smessage") {
    const auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    const std::string& payload = reply.elements[2].text;
    for (Watch* watch : it->second) {
      if (names(payload, watch->entry_)) watch->wake(true);
    }
  }
}

}  // namespace warden::engines::redis
