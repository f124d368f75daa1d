#include "engines/resp_client/pipeline.h"

#include <utility>

namespace warden::engines::resp_client {

Pipeline::Pipeline(std::shared_ptr<Connector> connector, std::chrono::milliseconds timeout)
    : connector_(std::move(connector)), timeout_(timeout) {}

Pipeline::Result Pipeline::run(std::vector<Command> commands) {
  Batch mine;
  mine.commands = std::move(commands);
  std::unique_lock lock(mu_);
  queued_.push_back(&mine);
  while (!mine.done) {
    if (leading_) {
      round_done_.wait(lock);
      continue;
    }
    // Lead one round with everything queued so far.
    leading_ = true;
    std::vector<Batch*> round;
    round.swap(queued_);
    lock.unlock();
    execute(round);
    lock.lock();
    for (Batch* batch : round) batch->done = true;
    leading_ = false;
    round_done_.notify_all();
  }
  if (mine.error) std::rethrow_exception(mine.error);
  return std::move(mine.result);
}

void Pipeline::execute(const std::vector<Batch*>& round) {
  try {
    // A connection the server closed meanwhile (a restart) is replaced before the round
    // rather than failing it.
    if (conn_ && !still_current(*conn_, connector_->options())) conn_.reset();
    if (!conn_ || !conn_->reusable()) {
      conn_.reset();
      conn_ = connector_->connect();
    }
    std::size_t total = 0;
    for (const Batch* batch : round) {
      for (const Command& command : batch->commands) conn_->append(command);
      total += batch->commands.size();
    }
    const auto sent = Clock::now();
    const auto deadline = sent + timeout_;
    conn_->flush(deadline);
    std::vector<Reply> replies;
    replies.reserve(total);
    for (std::size_t i = 0; i < total; ++i) replies.push_back(conn_->read_reply(deadline));
    // A server that refuses writes as a replica is no longer the master (a failover
    // demoted it): the next round goes to whichever server is.
    for (const Reply& reply : replies) {
      if (reply.is_error() && reply.error_code() == "READONLY") {
        connector_->not_master(*conn_);
        conn_.reset();
        break;
      }
    }

    auto next = replies.begin();
    for (Batch* batch : round) {
      batch->result.sent = sent;
      const auto n = static_cast<std::ptrdiff_t>(batch->commands.size());
      batch->result.replies.assign(std::make_move_iterator(next),
                                   std::make_move_iterator(next + n));
      next += n;
    }
  } catch (...) {
    conn_.reset();
    const std::exception_ptr error = std::current_exception();
    for (Batch* batch : round) batch->error = error;
  }
}

}  // namespace warden::engines::resp_client
