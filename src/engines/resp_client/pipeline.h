// engines/resp_client/pipeline.h — one shared connection on which short commands of
// concurrent callers travel together in pipelined rounds (group commit).
//
// A caller hands in its commands and blocks. If no round is in flight it leads one: it
// takes every batch queued so far (its own and those of threads that arrived
// meanwhile), writes them in one go, reads all replies and hands each caller its own.
// Otherwise it waits, and its batch goes out in the next round, which the first waiting
// caller leads. So N concurrent renewals and releases cost one round trip, not N, and
// nobody waits behind more than one round in flight.
//
// Failures: a round that cannot be sent or answered fails every batch in it with the
// same Error and drops the connection; the next round reconnects through the
// Connector (which spaces attempts by its back-off). Error replies are not failures:
// they come back as replies.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
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

// Where an engine sends a batch of commands: one server's Pipeline, or a ClusterRouter
// that sends each command to the node serving its key (cluster_router.h).
class Runner {
 public:
  virtual ~Runner() = default;
  // The replies to `commands`, in order; error replies come back as replies. Throws
  // warden::Error when the commands cannot be sent or answered.
  virtual RoundResult run(std::vector<Command> commands) = 0;
};

class Pipeline final : public Runner {
 public:
  using Result = RoundResult;

  // `timeout` bounds one round (writing it and reading every reply).
  Pipeline(std::shared_ptr<Connector> connector, std::chrono::milliseconds timeout);
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Sends `commands` and returns their replies. Blocks for at most two rounds (the one
  // in flight, then its own), each bounded by `timeout` plus, when it must reconnect,
  // the connect timeout. Throws Error: unavailable or deadline_exceeded when the round
  // failed (or the Connector is backing off), permission_denied if a reconnect's AUTH
  // is refused.
  Result run(std::vector<Command> commands) override;

 private:
  struct Batch {
    std::vector<Command> commands;
    Result result;
    std::exception_ptr error;
    bool done = false;
  };

  // Writes and reads one round; fills each batch's result or error. Called by the
  // leader only, without mu_.
  void execute(const std::vector<Batch*>& round);

  const std::shared_ptr<Connector> connector_;
  const std::chrono::milliseconds timeout_;

  std::mutex mu_;
  std::condition_variable round_done_;
  std::vector<Batch*> queued_;  // guarded by mu_: batches for the next round
  bool leading_ = false;        // guarded by mu_: a round is in flight

  // Used by the leader of the round in flight only (leading_ serialises leaders).
  std::unique_ptr<Connection> conn_;
};

}  // namespace warden::engines::resp_client
