// engines/warden/wait_channel.h — the asynchronous acquires of a warden:// engine: every
// one on one connection in WAITS mode (docs/protocol.md, protocol 8), driven by one
// thread, however many wait.
//
// Each acquire is sent as `ACQUIRE ... TAG n` and answered `[n, reply]` whenever it
// resolves, in any order. A cancelled wait sends `WITHDRAW n` and learns the truth from
// the answer, as a blocking wait's half-close does: nil, or the grant that won the race
// (given back, since nobody will use it). A server silent past a wait's deadline plus
// half of op_timeout is asked to withdraw it too, and after op_timeout more the wait ends
// as timed out; the channel remembers the tag and gives back a grant that comes later.
//
// The connection is PINGed once a second while waits are on it: no PONG within
// op_timeout means it was dropped silently. When it breaks (closed, reset, silent, or a
// reply that is not the protocol) every wait on it is told Error(unavailable) — the
// server drops a closed connection's waiters — and the next acquire connects again.
//
// Outcomes are told on the channel's thread and must not block it. The thread ends with
// stop(), which the engine calls first in its destructor; it may be called from a
// callback on the thread itself (the last Client reference dropped there).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/engine.h"
#include "core/wait_inbox.h"
#include "engines/resp_client/connection.h"
#include "engines/resp_client/connector.h"
#include "engines/resp_client/liveness.h"
#include "engines/warden/protocol.h"

namespace warden::engines::wardend {

class WaitChannel : public std::enable_shared_from_this<WaitChannel> {
 public:
  using GiveBack = std::function<void(const core::GrantRef&)>;

  // Starts the channel's thread (it connects when the first acquire comes). `give_back`
  // releases a grant nobody will use; it is never called after stop().
  static std::shared_ptr<WaitChannel> start(std::shared_ptr<resp_client::Connector> connector,
                                            std::chrono::milliseconds op_timeout,
                                            RetryPolicy retry, GiveBack give_back);
  ~WaitChannel();
  WaitChannel(const WaitChannel&) = delete;
  WaitChannel& operator=(const WaitChannel&) = delete;

  // Engine::acquire_async's contract: `done` is called once, on the channel's thread.
  void acquire(core::AcquireRequest request, core::Engine::AcquireDone done);

  // Ends the thread; waits for it unless called on it. Waits still pending are told
  // Error(unavailable); nothing is called after stop() returns.
  void stop();

 private:
  struct Wait;
  using Waits = std::unordered_map<std::uint64_t, std::unique_ptr<Wait>>;

  WaitChannel(std::shared_ptr<resp_client::Connector> connector,
              std::chrono::milliseconds op_timeout, RetryPolicy retry, GiveBack give_back);

  void run();
  // One turn: takes what arrived and was cancelled, sends what is due, reads what came.
  void turn();
  void open();
  void send(Wait& wait, Clock::time_point now);
  void withdraw(Wait& wait, Clock::time_point now);
  void cancelled(std::uint64_t id, Clock::time_point now);
  void fire(Wait& wait, Clock::time_point now);
  void deliver(const resp_client::Reply& reply);
  void answered(Waits::iterator it, const resp_client::Reply& inner);
  // Tells `it` its outcome and forgets it, or keeps it as abandoned (`keep`): told, but
  // the server may still answer, and a grant then is given back.
  void tell(Waits::iterator it, std::optional<core::Granted> granted, std::exception_ptr error,
            bool keep = false);
  // The connection broke: every wait is told `why`, abandoned ones forgotten.
  void fail_all(const Error& why);
  void give_back(const core::GrantRef& grant);
  void schedule(Wait& wait, std::optional<Clock::time_point> at);
  bool stopping() const { return inbox_.stopping(); }

  const std::shared_ptr<resp_client::Connector> connector_;
  const std::chrono::milliseconds op_timeout_;
  const RetryPolicy retry_;
  const GiveBack give_back_;
  core::WaitInbox<Wait> inbox_;  // before the waits, whose stop callbacks use it

  // The thread's own.
  std::unique_ptr<resp_client::Connection> conn_;
  Waits waits_;
  std::size_t on_wire_ = 0;  // waits asked and not yet answered (abandoned ones too)
  std::set<std::pair<Clock::time_point, std::uint64_t>> timers_;
  resp_client::Liveness liveness_;
};

}  // namespace warden::engines::wardend
