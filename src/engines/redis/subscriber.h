// engines/redis/subscriber.h — the wake-ups of a Client's waiters: one subscriber
// connection per Client (per master, in a cluster), shared by all its waiters on all
// locks.
//
// A waiter that was not granted at once watches its lock's channel. The subscriber
// SSUBSCRIBEs to a channel while anyone watches it (sharded pub/sub, Redis 7: the
// channel shares the lock's hash tag, so in a cluster it lives on the lock's node and
// messages do not cross the cluster bus), and wakes a waiter when a message
// names the waiter's entry (it was admitted; every waiter, fair or not, is served from
// the queue, so no other message concerns it; election observers watch for '~', and
// lock caching's revoke watches for '?', words no entry is). It also wakes every
// waiter of a channel when its subscription is confirmed, after a reconnect, and when
// Redis ends the subscription itself (an unasked SUNSUBSCRIBE: the slot moved to another
// node): messages published before that, or since, were not seen, so each waiter looks
// once.
//
// A subscribed connection hears nothing while nothing is published, so one dropped
// silently (a NAT or firewall that forgot it) would look quiet for ever: the thread
// PINGs it every second and counts a PING unanswered within the timeout as a broken
// connection (reconnect, and every watch looks again).
//
// Messages can be lost (a killed connection, a Redis restart, a slot that moved to
// another node); waiters therefore also
// poll (see redis_engine.cc), and a lost message costs at most one poll interval.
//
// The thread and its connection start with the first watch, and reconnect with the
// RetryPolicy's back-off while anyone watches. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "engines/resp_client/backoff.h"
#include "engines/resp_client/connection.h"
#include "engines/resp_client/liveness.h"
#include "engines/resp_client/reply.h"
#include "engines/resp_client/tls_context.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden::engines::redis {

class Subscriber {
 public:
  // One waiter's registration; unregisters on destruction.
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    // Why a wait ended: a message named the watch's entry, or the subscription was
    // (re)confirmed and messages published meanwhile may have been missed (look again).
    enum class Woken { no, by_message, to_look };
    // Blocks until a wake-up that came after the previous wait() returned (or after
    // the watch began), until `until`, or until `stop`. A message counts before a look.
    Woken wait_why(Clock::time_point until, const std::stop_token& stop);
    // The same, true for either kind of wake-up.
    bool wait(Clock::time_point until, const std::stop_token& stop) {
      return wait_why(until, stop) != Woken::no;
    }
    // Whether the subscription is in place now (confirmed, and its connection not lost
    // since): a message published now reaches the watch.
    bool subscribed() const;

   private:
    friend class Subscriber;
    Watch(Subscriber* owner, std::string channel, std::string entry,
          std::function<void(bool)> on_wake);
    void wake(bool by_message);

    Subscriber* owner_;
    const std::string channel_;
    const std::string entry_;
    const std::function<void(bool)> on_wake_;
    mutable std::mutex mu_;
    std::condition_variable_any cv_;
    std::uint64_t wakes_ = 0;          // guarded by mu_
    std::uint64_t messages_ = 0;       // guarded by mu_: the wakes_ that were messages
    std::uint64_t seen_ = 0;           // guarded by mu_
    std::uint64_t seen_messages_ = 0;  // guarded by mu_
  };

  // `tls`: the TLS context of the engine's Connector (nullptr for plain TCP), so the
  // certificates are loaded once per Client.
  Subscriber(resp_client::ConnectOptions options, const RetryPolicy& retry,
             std::shared_ptr<const resp_client::TlsContext> tls = nullptr);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Starts watching `channel` for `entry` (see above). The Watch must not outlive the
  // Subscriber. `on_wake`, if given, is also called at each wake-up (true for a
  // message), on the subscriber's thread with its lock held: it must only hand the
  // news on, never block or touch the Subscriber.
  std::unique_ptr<Watch> watch(const std::string& channel, const std::string& entry,
                               std::function<void(bool by_message)> on_wake = {});

 private:
  struct Order {
    bool subscribe;
    std::string channel;
  };

  void unwatch(Watch* watch);
  void run();
  // Sends `orders` (and the subscriptions of a fresh connection) and handles what
  // arrives within one read slice. Throws Error when the connection fails.
  void exchange(resp_client::Connection& conn, std::vector<Order> orders);
  void handle(const resp_client::Reply& reply);
  // The connection is gone: no channel is subscribed until confirmed again.
  void lose_subscriptions();
  void notify_thread();
  // Sleeps up to `delay`, less if notified; clears the notification.
  void sleep_for_notification(Clock::duration delay);

  const resp_client::ConnectOptions options_;
  const RetryPolicy retry_;
  const std::shared_ptr<const resp_client::TlsContext> tls_;
  int event_fd_ = -1;  // readable when the thread has orders or must stop

  std::mutex mu_;
  // Guarded by mu_: the watches of each channel; SUBSCRIBEs sent but not yet
  // acknowledged, per channel; orders for the thread; whether the Subscriber is ending.
  std::map<std::string, std::vector<Watch*>> channels_;
  std::map<std::string, int> unacknowledged_;
  // Channels subscribed on the current connection (Watch::subscribed asks here).
  std::set<std::string> confirmed_;
  std::vector<Order> orders_;
  bool stopping_ = false;
  // The thread's own: the liveness PING on the current connection (see exchange).
  resp_client::Liveness liveness_;
  std::thread thread_;  // started by the first watch
};

}  // namespace warden::engines::redis
