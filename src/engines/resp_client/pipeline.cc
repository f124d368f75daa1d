#include "engines/resp_client/pipeline.h"

#include <algorithm>
#include <utility>

#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

// How long a posted batch's replies may stay unread before the drainer reads them. Busy
// callers read them sooner (every round reads what has arrived); this bounds how late an
// idle client learns that its release was confirmed, or failed.
constexpr auto kDrainDelay = std::chrono::milliseconds(1);

// The pipeline whose completions this thread is running, if any: a post from a
// completion is queued for the next round instead of waiting for the round in flight,
// which is this thread's own.
thread_local const Pipeline* completing = nullptr;

// Whether `error` says the server did not answer in time.
bool ended_by_timeout(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.code() == Errc::deadline_exceeded;
  } catch (...) {
    return false;
  }
}

}  // namespace

void Runner::post(std::vector<Command> commands, Completion done) {
  RoundResult result;
  std::exception_ptr error;
  try {
    result = run(std::move(commands));
  } catch (...) {
    error = std::current_exception();
  }
  done(result, error);
}

Pipeline::Pipeline(std::shared_ptr<Connector> connector, std::chrono::milliseconds timeout)
    : connector_(std::move(connector)), timeout_(timeout) {}

Pipeline::~Pipeline() {
  if (drainer_.joinable()) {
    drainer_.request_stop();
    drainer_.join();
  }
  settle();
}

Pipeline::Result Pipeline::run(std::vector<Command> commands) {
  auto mine = std::make_shared<Batch>();
  mine->commands = std::move(commands);
  // A round under way (another thread's, on a server that went silent) is waited for no
  // longer than this call's own timeout: a batch it did not take is taken back, and the
  // call fails as its own round would have. A batch the round took ends with it.
  const auto give_up = Clock::now() + timeout_;
  std::unique_lock lock(mu_);
  queued_.push_back(mine);
  const auto unanswered_before = unanswered_rounds_;
  const auto take_back = [&] {
    const auto it = std::find(queued_.begin(), queued_.end(), mine);
    if (it == queued_.end()) return false;
    queued_.erase(it);
    return true;
  };
  while (!mine->done) {
    if (leading_) {
      if (round_done_.wait_until(lock, give_up) == std::cv_status::timeout && leading_ &&
          take_back()) {
        throw Error(Errc::deadline_exceeded,
                    "no answer in time: the round before this one is still unanswered");
      }
      continue;
    }
    // A round that went unanswered while this batch waited says the server is silent:
    // a round of its own would reconnect to it (a TLS handshake nobody answers) and
    // wait once more, twice the timeout in all.
    if (unanswered_rounds_ != unanswered_before && take_back()) {
      throw Error(Errc::deadline_exceeded,
                  "no answer in time: the round before this one went unanswered");
    }
    lead(lock, /*read_all=*/false);
  }
  if (mine->error) std::rethrow_exception(mine->error);
  return std::move(mine->result);
}

void Pipeline::post(std::vector<Command> commands, Completion done) {
  auto mine = std::make_shared<Batch>();
  mine->commands = std::move(commands);
  mine->completion = std::move(done);
  std::unique_lock lock(mu_);
  if (!drainer_.joinable()) {
    drainer_ = std::jthread([this](const std::stop_token& stop) { drain_loop(stop); });
  }
  queued_.push_back(mine);
  if (completing == this) {  // this thread leads: it writes the batch before it stops
    reposted_ = true;
    return;
  }
  while (!mine->written) {
    if (leading_) {
      round_done_.wait(lock);
      continue;
    }
    lead(lock, /*read_all=*/false);
  }
}

void Pipeline::settle() {
  std::unique_lock lock(mu_);
  while (true) {
    if (leading_) {
      round_done_.wait(lock);
      continue;
    }
    if (owed_count_ == 0 && queued_.empty()) return;
    lead(lock, /*read_all=*/true);
  }
}

void Pipeline::lead(std::unique_lock<std::mutex>& lock, bool read_all) {
  // Once more while a completion posted again (a script the server had lost, sent in
  // full): nobody else may be about to lead, so this thread writes it.
  do {
    reposted_ = false;
    leading_ = true;
    std::vector<BatchPtr> round;
    round.swap(queued_);
    lock.unlock();
    const std::vector<BatchPtr> completed = execute(round, read_all);
    const bool unanswered = std::exchange(unanswered_, false);
    completing = this;
    for (const BatchPtr& batch : completed) batch->completion(batch->result, batch->error);
    completing = nullptr;
    lock.lock();
    for (const BatchPtr& batch : round) {
      batch->written = true;
      if (!batch->completion) batch->done = true;  // a run() batch is always read in its round
    }
    if (unanswered) ++unanswered_rounds_;
    const bool was_empty = owed_count_ == 0;
    owed_count_ = owed_.size();
    if (!owed_.empty()) oldest_owed_ = owed_.front()->result.sent;
    leading_ = false;
    round_done_.notify_all();
    // The drainer sleeps without a deadline only while nothing is owed.
    if (was_empty && owed_count_ > 0) drain_wake_.notify_all();
  } while (reposted_);
}

bool Pipeline::read_front(bool block) {
  Batch& batch = *owed_.front();
  while (batch.result.replies.size() < batch.commands.size()) {
    if (block) {
      batch.result.replies.push_back(conn_->read_reply(batch.result.sent + timeout_));
      continue;
    }
    auto reply = conn_->poll_reply(Clock::now());
    if (!reply) return false;
    batch.result.replies.push_back(std::move(*reply));
  }
  return true;
}

void Pipeline::fail_owed(const std::exception_ptr& error, std::vector<BatchPtr>& out) {
  for (const BatchPtr& batch : owed_) {
    batch->error = error;
    batch->result.replies.clear();
    if (batch->completion) out.push_back(batch);
  }
  owed_.clear();
}

void Pipeline::read_owed(std::size_t must, bool read_all, std::vector<BatchPtr>& completed) {
  bool demoted = false;
  while (!owed_.empty()) {
    if (!read_front(read_all || must > 0)) break;
    BatchPtr batch = std::move(owed_.front());
    owed_.pop_front();
    if (must > 0) --must;
    // A server that refuses writes as a replica is no longer the master (a failover
    // demoted it): the next round goes to whichever server is.
    demoted = demoted ||
              std::any_of(batch->result.replies.begin(), batch->result.replies.end(),
                          [](const Reply& reply) {
                            return reply.is_error() && reply.error_code() == "READONLY";
                          });
    if (batch->completion) completed.push_back(std::move(batch));
  }
  if (demoted) {
    connector_->server_moved(*conn_);
    fail_owed(std::make_exception_ptr(
                  Error(Errc::unavailable, conn_->endpoint() + " is no longer the master")),
              completed);
    conn_.reset();
  }
}

std::vector<Pipeline::BatchPtr> Pipeline::execute(const std::vector<BatchPtr>& round,
                                                  bool read_all) {
  std::vector<BatchPtr> completed;
  const bool answer_wanted = std::any_of(round.begin(), round.end(),
                                         [](const BatchPtr& batch) { return !batch->completion; });
  // A round that waits for an answer first reads what is owed: if the server closed the
  // connection meanwhile (a restart), that fails only the posts it owed, and the round
  // goes out on a new connection rather than failing with them.
  if (answer_wanted && !owed_.empty()) {
    try {
      read_owed(owed_.size(), true, completed);
    } catch (...) {
      conn_.reset();
      fail_owed(std::current_exception(), completed);
    }
  }
  std::size_t written = 0;  // batches of `round` appended to owed_
  try {
    // A connection the server closed meanwhile is replaced before the round rather than
    // failing it; one that still owes replies is kept for them (a closed one fails when
    // they are read).
    if (conn_ && !still_current(*conn_, connector_->options())) {
      fail_owed(std::make_exception_ptr(Error(
                    Errc::unavailable, conn_->endpoint() + " is no longer the master")),
                completed);
      conn_.reset();
    }
    if (conn_ && owed_.empty() && !conn_->reusable()) conn_.reset();
    // Taken before a new connection is made: the round's reply deadline covers the
    // connect too (a TLS handshake with a frozen server answers nothing), and a lease
    // renewed by this round counts from no later than this.
    const auto sent = Clock::now();
    if (!conn_) conn_ = connector_->connect();

    for (const BatchPtr& batch : round) {
      for (const Command& command : batch->commands) conn_->append(command);
      batch->result.sent = sent;
      owed_.push_back(batch);
      ++written;
    }
    if (!round.empty()) conn_->flush(sent + timeout_);

    // Replies come in the order written: a run() batch of this round needs every reply
    // owed before its own. Past the last of them, only what has already arrived is read,
    // unless `read_all`.
    std::size_t must_read = 0;
    for (std::size_t i = 0; i < owed_.size(); ++i) {
      if (!owed_[i]->completion) must_read = i + 1;
    }
    read_owed(must_read, read_all, completed);
  } catch (...) {
    conn_.reset();
    const std::exception_ptr error = std::current_exception();
    unanswered_ = ended_by_timeout(error);
    fail_owed(error, completed);
    for (std::size_t i = written; i < round.size(); ++i) {
      round[i]->error = error;
      if (round[i]->completion) completed.push_back(round[i]);
    }
  }
  return completed;
}

void Pipeline::drain_loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    if (owed_count_ == 0) {
      drain_wake_.wait(lock, stop, [&] { return owed_count_ > 0; });
      continue;
    }
    const auto due = oldest_owed_ + kDrainDelay;
    const auto now = Clock::now();
    if (leading_ || now < due) {
      drain_wake_.wait_until(lock, stop, leading_ ? now + kDrainDelay : due, [] { return false; });
      continue;
    }
    lead(lock, /*read_all=*/true);
  }
}

}  // namespace warden::engines::resp_client
