// engines/redis/wait_lines.h — a waiter's own connection, on which it blocks until the
// lock is handed to it and then picks the grant up without a round trip in between.
//
// A waiter whose request was queued sends, in one write on a connection of its own,
//
//     BLPOP <its wake list> <seconds>      then      EVALSHA acquire … (its next attempt)
//
// Redis holds the connection's input at the BLPOP until the list gets an element or the
// seconds pass, and runs the EVALSHA right after, in the same turn of its event loop. A
// release that admits the waiter pushes to the waiter's list (lua/lock.lua, admit), so
// the hand-off costs the releaser's one-way trip, two scripts and the grant's one-way
// trip back: no pub/sub message, no subscriber thread, no second request. And a list
// keeps what was pushed before the BLPOP arrived, so no wake-up is lost the way a pub/sub
// message published before a subscription is.
//
// The connections are pooled per engine (a Client): at most `max_lines` are open (the
// URI's wait_lines), so a Client with more waiting threads than that lets the rest wait
// on the subscriber (subscriber.h), and it keeps kMaxIdle of them open while nobody
// waits.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "engines/resp_client/connector.h"
#include "engines/resp_client/pipeline.h"
#include "engines/resp_client/script.h"

namespace warden::engines::redis {

class WaitLines {
 public:
  static constexpr std::size_t kMaxIdle = 4;

  // One connection and the eventfd that interrupts a wait on it (a stop).
  class Line {
   public:
    ~Line();
    Line(const Line&) = delete;
    Line& operator=(const Line&) = delete;

   private:
    friend class WaitLines;
    explicit Line(std::unique_ptr<resp_client::Connection> conn);
    std::unique_ptr<resp_client::Connection> conn_;
    int stop_fd_ = -1;
    WaitLines* owner_ = nullptr;  // uncounted from when the line closes
  };

  // `connector`: the engine's (its back-off, TLS context, and Sentinel's master).
  // `op_timeout`: how long Redis may take to answer once the wait is over.
  WaitLines(std::shared_ptr<resp_client::Connector> connector, std::size_t max_lines,
            std::chrono::milliseconds op_timeout);
  ~WaitLines();
  WaitLines(const WaitLines&) = delete;
  WaitLines& operator=(const WaitLines&) = delete;

  // A line for one wait: an idle one that is still fit for use, or a new one. nullptr
  // when `max_lines` are in use or none can be opened now (the caller waits on the
  // subscriber instead).
  std::unique_ptr<Line> take();
  // After a wait that left the line fit for another: kept for the next waiter (up to
  // kMaxIdle), else closed. A line whose wait failed is just destroyed.
  void give_back(std::unique_ptr<Line> line);

  // Blocks on `wake_list` until it is pushed to or `until`, then runs `attempt` (and
  // `then`, WAIT, after it) on Redis at once. A stop pushes to the list itself (through
  // `runner`) so the wait ends within a round trip. Returns the replies of `attempt` and
  // `then`, with `sent` when the attempt's request was written (no later than the
  // script ran). Throws Error when the line fails, Redis does not answer in time, or
  // the BLPOP is refused: the line must not be given back then, and the attempt may or
  // may not have run.
  resp_client::RoundResult wait_then_run(Line& line, const std::string& wake_list,
                                         Clock::time_point until,
                                         const resp_client::ScriptCall& attempt,
                                         const resp_client::Command* then,
                                         resp_client::Runner& runner, const std::stop_token& stop);

 private:
  void closed();  // a Line is gone

  const std::shared_ptr<resp_client::Connector> connector_;
  const std::size_t max_lines_;
  const std::chrono::milliseconds op_timeout_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Line>> idle_;  // guarded by mu_
  std::size_t open_ = 0;                     // guarded by mu_: lines in existence
};

}  // namespace warden::engines::redis
