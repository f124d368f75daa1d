// engines/resp_client/pipeline.h — one shared connection on which short commands of
// concurrent callers travel together in pipelined rounds (group commit).
//
// A caller hands in its commands. If no round is in flight it leads one: it takes every
// batch queued so far (its own and those of threads that arrived meanwhile) and writes
// them in one go. Otherwise it waits, and its batch goes out in the next round, which the
// first waiting caller leads. So N concurrent renewals and releases cost one round trip,
// not N, and nobody waits behind more than one round in flight.
//
// Two ways to hand commands in:
//   - run() blocks until its replies are read, and returns them;
//   - post() returns once its commands are written; their replies are read later, and
//     handed to its completion, by whoever reads next on the connection: the leader of
//     a later round (a round reads whatever replies have already arrived, and a run()
//     reads every reply owed before its own), settle(), or the pipeline's drainer
//     thread, which reads replies still owed a moment after they were written.
// Replies come back in the order the commands were written, so a command handed in
// after a post() is answered after it: the server has seen the posted commands first.
//
// Failures: a round that cannot be sent or answered fails every batch in it, and every
// posted batch still owed a reply, with the same Error, and drops the connection; the
// next round reconnects through the Connector (which spaces attempts by its back-off).
// A run() that waited for a round the server left unanswered fails with it rather than
// spending another timeout on a new connection to the same silent server. Error
// replies are not failures: they come back as replies.
//
// Thread-safe. Completions run on whichever thread reads their replies, while it leads a
// round: they may post() to the same pipeline (written before that thread stops
// leading), and must not run() or settle() on it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engines/resp_client/connection.h"
#include "engines/resp_client/connector.h"
#include "engines/resp_client/reply.h"

namespace warden::engines::resp_client {

// What one batch of commands brought back.
struct RoundResult {
  // When the round holding these commands started to be written: no later than the
  // moment the server read any of them, on this process's clock.
  Clock::time_point sent;
  std::vector<Reply> replies;  // one per command, in order
};

// Called once for a posted batch: its result, or the Error that failed it (then the
// result is empty and the commands may or may not have been executed).
using Completion = std::function<void(RoundResult&, std::exception_ptr)>;

// Where an engine sends a batch of commands: one server's Pipeline, or a ClusterRouter
// that sends each command to the node serving its key (cluster_router.h).
class Runner {
 public:
  virtual ~Runner() = default;
  // The replies to `commands`, in order; error replies come back as replies. Throws
  // warden::Error when the commands cannot be sent or answered.
  virtual RoundResult run(std::vector<Command> commands) = 0;
  // Sends `commands` and hands their replies (or the failure) to `done` later. This
  // default runs them at once and calls `done` before returning.
  virtual void post(std::vector<Command> commands, Completion done);
  // Returns once every posted batch has been completed. The default has none owed.
  virtual void settle() {}
};

class Pipeline final : public Runner {
 public:
  using Result = RoundResult;

  // `timeout` bounds one round (writing it and reading every reply).
  Pipeline(std::shared_ptr<Connector> connector, std::chrono::milliseconds timeout);
  // Completes every posted batch (reading its replies within `timeout`) first.
  ~Pipeline() override;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Sends `commands` and returns their replies. Blocks for at most two rounds (the one
  // in flight, then its own), each bounded by `timeout` plus, when it must reconnect,
  // the connect timeout; only one of them when the round in flight goes unanswered
  // (it then fails with deadline_exceeded as that round did). Throws Error: unavailable
  // or deadline_exceeded when the round failed (or the Connector is backing off),
  // permission_denied if a reconnect's AUTH is refused.
  Result run(std::vector<Command> commands) override;

  // Writes `commands` (at most after the round in flight) and returns; `done` gets their
  // replies later (see above). A round that fails to write them completes `done` with
  // the Error before post returns.
  void post(std::vector<Command> commands, Completion done) override;

  // Reads the replies of every posted batch written so far and completes them.
  void settle() override;

 private:
  struct Batch {
    std::vector<Command> commands;
    Result result;  // replies accumulate here as they are read
    std::exception_ptr error;
    bool written = false;  // guarded by mu_ once queued
    bool done = false;     // guarded by mu_ once queued
    Completion completion;  // set for a posted batch
  };
  using BatchPtr = std::shared_ptr<Batch>;

  // Leads one round with everything queued (mu_ held on entry and on return, released
  // meanwhile). With `read_all`, every owed reply is read, blocking; otherwise only the
  // replies a run() of this round needs, plus those already arrived.
  void lead(std::unique_lock<std::mutex>& lock, bool read_all);
  // Writes `round` and reads replies (leader only, without mu_). Returns the posted
  // batches completed, whose completions the caller runs.
  std::vector<BatchPtr> execute(const std::vector<BatchPtr>& round, bool read_all);
  // Reads the front owed batch's remaining replies: waiting until its deadline if
  // `block`, else only those already arrived. true once the batch has them all.
  bool read_front(bool block);
  // Reads owed replies in order (leader only): the first `must` batches waiting for
  // them, the rest only as far as they have arrived unless `read_all`. Posted batches
  // read in full go to `completed`. A READONLY reply (a demoted master) fails the rest
  // and drops the connection. Throws when the connection fails.
  void read_owed(std::size_t must, bool read_all, std::vector<BatchPtr>& completed);
  // Fails every owed batch with `error` (leader only), appending the posted ones to `out`.
  void fail_owed(const std::exception_ptr& error, std::vector<BatchPtr>& out);
  // Reads replies still owed a moment after they were written, so that a posted batch
  // is completed even if nothing else is sent on the connection.
  void drain_loop(const std::stop_token& stop);

  const std::shared_ptr<Connector> connector_;
  const std::chrono::milliseconds timeout_;

  std::mutex mu_;
  std::condition_variable round_done_;
  std::condition_variable_any drain_wake_;
  std::vector<BatchPtr> queued_;         // guarded by mu_: batches for the next round
  bool leading_ = false;                 // guarded by mu_: a round is in flight
  bool reposted_ = false;                // guarded by mu_: a completion posted a batch
  std::size_t owed_count_ = 0;           // guarded by mu_: owed_.size() after the last round
  std::uint64_t unanswered_rounds_ = 0;  // guarded by mu_: rounds that ended by a timeout
  Clock::time_point oldest_owed_;        // guarded by mu_: when the oldest owed was written

  // Used by the leader of the round in flight only (leading_ serialises leaders).
  std::unique_ptr<Connection> conn_;
  std::deque<BatchPtr> owed_;  // written, replies not all read; in the order written
  bool unanswered_ = false;    // the round in flight ended by a timeout

  std::jthread drainer_;  // started by the first post; guarded by mu_
};

}  // namespace warden::engines::resp_client
