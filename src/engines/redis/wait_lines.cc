#include "engines/redis/wait_lines.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <utility>

#include "warden/error.h"

namespace warden::engines::redis {
namespace {

// How long the element a stop pushes may outlive a withdraw that never ran.
constexpr std::string_view kStopPushLifeMs = "60000";

// Empties an eventfd's counter (non-blocking): a stop seen before must not end the next
// wait on the same line.
void drain(int fd) {
  std::uint64_t count = 0;
  [[maybe_unused]] const auto n = ::read(fd, &count, sizeof count);
}

// BLPOP's timeout in seconds with millisecond digits; never 0, which waits forever.
std::string seconds_until(Clock::time_point until) {
  const auto ms = std::max<std::int64_t>(
      1, std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count());
  char text[32];
  std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(ms / 1000),
                static_cast<long long>(ms % 1000));
  return text;
}

}  // namespace

WaitLines::Line::Line(std::unique_ptr<resp_client::Connection> conn) : conn_(std::move(conn)) {
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

WaitLines::Line::~Line() {
  if (stop_fd_ >= 0) ::close(stop_fd_);
  if (owner_ != nullptr) owner_->closed();
}

WaitLines::WaitLines(std::shared_ptr<resp_client::Connector> connector, std::size_t max_lines,
                     std::chrono::milliseconds op_timeout)
    : connector_(std::move(connector)), max_lines_(max_lines), op_timeout_(op_timeout) {}

WaitLines::~WaitLines() {
  // Destroyed outside mu_: each Line's destructor takes it.
  std::vector<std::unique_ptr<Line>> lines;
  {
    std::lock_guard lock(mu_);
    lines.swap(idle_);
  }
}

void WaitLines::closed() {
  std::lock_guard lock(mu_);
  --open_;
}

std::unique_ptr<WaitLines::Line> WaitLines::take() {
  std::vector<std::unique_ptr<Line>> unfit;  // closed outside mu_
  {
    std::lock_guard lock(mu_);
    while (!idle_.empty()) {
      auto line = std::move(idle_.back());
      idle_.pop_back();
      // Not closed by the server meanwhile, nothing unread, and (behind Sentinel) still
      // the master's.
      if (line->conn_->reusable() &&
          resp_client::still_current(*line->conn_, connector_->options())) {
        return line;
      }
      unfit.push_back(std::move(line));
    }
    if (open_ >= max_lines_) return nullptr;
    ++open_;  // counted before the connect, so concurrent takers respect the bound
  }
  std::unique_ptr<resp_client::Connection> conn;
  try {
    conn = connector_->connect();
  } catch (const Error&) {
    closed();
    return nullptr;
  }
  std::unique_ptr<Line> line(new Line(std::move(conn)));
  line->owner_ = this;
  if (line->stop_fd_ < 0)
    return nullptr;  // no eventfd (descriptor limit): its destructor uncounts it
  return line;
}

void WaitLines::give_back(std::unique_ptr<Line> line) {
  if (!line || line->conn_->broken()) return;
  drain(line->stop_fd_);
  {
    std::lock_guard lock(mu_);
    if (idle_.size() < kMaxIdle) {
      idle_.push_back(std::move(line));
      return;
    }
  }
  line.reset();  // outside mu_, which its destructor takes
}

resp_client::RoundResult WaitLines::wait_then_run(Line& line, const std::string& wake_list,
                                                  Clock::time_point until,
                                                  const resp_client::ScriptCall& attempt,
                                                  const resp_client::Command* then,
                                                  resp_client::Runner& runner,
                                                  const std::stop_token& stop) {
  resp_client::Connection& conn = *line.conn_;
  drain(line.stop_fd_);
  const std::string seconds = seconds_until(until);
  const std::string_view blpop[] = {"BLPOP", wake_list, seconds};
  conn.append(std::span<const std::string_view>(blpop));
  conn.append(resp_client::script_command(attempt, true));
  if (then != nullptr) conn.append(*then);
  resp_client::RoundResult result;
  result.sent = Clock::now();
  conn.flush(result.sent + op_timeout_);

  const int stop_fd = line.stop_fd_;
  std::stop_callback on_stop(stop, [stop_fd] {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(stop_fd, &one, sizeof one);
  });
  const Clock::time_point deadline = std::max(until, Clock::now()) + op_timeout_;
  const std::size_t expected = then != nullptr ? 3 : 2;
  bool pushed = false;
  std::vector<resp_client::Reply> replies;
  while (replies.size() < expected) {
    auto reply = conn.poll_reply(deadline, pushed ? -1 : stop_fd);
    if (reply) {
      replies.push_back(std::move(*reply));
      continue;
    }
    if (Clock::now() >= deadline) {
      conn.abandon();
      throw Error(Errc::deadline_exceeded, "waiting on " + conn.endpoint() + ": no answer within " +
                                               std::to_string(op_timeout_.count()) +
                                               " ms after the wait");
    }
    drain(stop_fd);
    if (!pushed && stop.stop_requested()) {
      // Ends the BLPOP now; the attempt behind it still runs, and the caller withdraws.
      // The element stays if the BLPOP had ended already: the withdraw deletes the list,
      // and its expiry covers a withdraw that does not reach Redis.
      runner.run(
          {{"LPUSH", wake_list, "stop"}, {"PEXPIRE", wake_list, std::string(kStopPushLifeMs)}});
      pushed = true;
    }
  }
  // The BLPOP's own reply, an element or nil at the timeout, says nothing the attempt
  // does not. An error (UNBLOCKED when the master became a replica; WRONGTYPE if
  // something else wrote the key) fails the line: BLPOP would answer at once every time,
  // and the caller's withdraw deletes the key.
  if (replies.front().is_error()) {
    throw Error(Errc::unavailable,
                "waiting on " + conn.endpoint() + ": BLPOP answered " + replies.front().text);
  }
  replies.erase(replies.begin());
  result.replies = std::move(replies);
  return result;
}

}  // namespace warden::engines::redis
