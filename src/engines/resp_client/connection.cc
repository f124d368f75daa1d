#include "engines/resp_client/connection.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "engines/resp_client/hiredis_reply.h"

namespace warden::engines::resp_client {
namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

enum class Ready { fd, wake, timeout };

// Waits until `fd` has `events` (or an error), `wake_fd` is readable, or `until`
// passes. poll() counts whole milliseconds, so the wait is rounded up and repeated
// until `until` has really passed.
Ready wait_for(int fd, short events, Clock::time_point until, int wake_fd) {
  while (true) {
    int timeout_ms = -1;
    if (until != Clock::time_point::max()) {
      const auto now = Clock::now();
      const auto left = until > now ? until - now : Clock::duration::zero();
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      timeout_ms = static_cast<int>(std::min<std::int64_t>(ms, INT_MAX));
    }
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = ::poll(fds, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Ready::fd;  // the read or write that follows reports the error
    }
    if (n == 0) {
      if (Clock::now() >= until) return Ready::timeout;
      continue;
    }
    if (wake_fd >= 0 && fds[1].revents != 0) return Ready::wake;
    return Ready::fd;
  }
}

void encode(std::string& out, std::string_view arg) {
  out += '$';
  out += std::to_string(arg.size());
  out += "\r\n";
  out.append(arg);
  out += "\r\n";
}

struct FreeReply {
  void operator()(void* reply) const { freeReplyObject(reply); }
};

}  // namespace

std::string endpoint_name(const std::string& host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Connection::Connection(redisContext* context, std::string endpoint)
    : context_(context), endpoint_(std::move(endpoint)) {}

Connection::~Connection() { redisFree(context_); }

int Connection::fd() const { return context_->fd; }

std::unique_ptr<Connection> Connection::open(const ConnectOptions& options) {
  const std::string endpoint = endpoint_name(options.host, options.port);
  const auto deadline = Clock::now() + options.timeout;
  // hiredis connects without blocking and polls for completion up to the timeout (name
  // resolution, if the host is a name, is the system resolver's and not bounded here).
  redisContext* context =
      redisConnectWithTimeout(options.host.c_str(), options.port, to_timeval(options.timeout));
  if (context == nullptr) throw transport_error(Failure::connect, endpoint, "out of memory");
  if (context->err != 0) {
    const std::string why = context->errstr;
    redisFree(context);
    throw transport_error(Failure::connect, endpoint, why);
  }
  std::unique_ptr<Connection> conn(new Connection(context, endpoint));

  // From here on every wait is a poll() with a deadline. Without REDIS_BLOCK, hiredis
  // reads EAGAIN as "nothing yet" rather than as an error.
  const int flags = ::fcntl(context->fd, F_GETFL);
  if (flags < 0 || ::fcntl(context->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    conn->fail(Failure::connect, std::strerror(errno));
  }
  context->flags &= ~REDIS_BLOCK;
  // A peer that vanished without a FIN (power loss, partition) is noticed in a parked
  // wait that may otherwise never end.
  redisEnableKeepAlive(context);

  if (options.password) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (options.user) auth.push_back(*options.user);
    auth.push_back(*options.password);
    const Reply reply = conn->command(auth, deadline);
    if (reply.is_error()) throw auth_error(reply, endpoint);
  }
  if (options.db) {
    const std::string db = std::to_string(*options.db);
    const std::vector<std::string_view> select = {"SELECT", db};
    const Reply reply = conn->command(select, deadline);
    if (reply.is_error()) {
      // NOAUTH/NOPERM keep their meaning; anything else is "no such db".
      const Error error = reply_error(reply, "SELECT " + db + " on " + endpoint);
      if (error.code() != Errc::internal) throw error;
      throw Error(Errc::invalid_argument, endpoint + " has no database " + db + ": " + reply.text);
    }
  }
  return conn;
}

void Connection::fail(Failure failure, const std::string& detail) {
  failed_ = true;
  throw transport_error(failure, endpoint_, detail);
}

void Connection::append(std::span<const std::string_view> args) {
  out_ += '*';
  out_ += std::to_string(args.size());
  out_ += "\r\n";
  for (std::string_view arg : args) encode(out_, arg);
}

void Connection::append(std::span<const std::string> args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  append(std::span<const std::string_view>(views));
}

void Connection::flush(Clock::time_point deadline) {
  if (failed_) fail(Failure::io, "the connection failed earlier");
  if (broken_) fail(Failure::io, "the connection was half-closed");
  std::size_t sent = 0;
  while (sent < out_.size()) {
    const ssize_t n = ::send(fd(), out_.data() + sent, out_.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_for(fd(), POLLOUT, deadline, -1) == Ready::timeout) {
        fail(Failure::timeout, "the request could not be sent");
      }
      continue;
    }
    fail(Failure::io, n < 0 ? std::strerror(errno) : "send() wrote nothing");
  }
  out_.clear();
}

std::optional<Reply> Connection::poll_reply(Clock::time_point until, int wake_fd) {
  if (failed_) fail(Failure::io, "the connection failed earlier");
  while (true) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) {
      fail(Failure::protocol, context_->errstr);
    }
    if (raw != nullptr) {
      const std::unique_ptr<void, FreeReply> owned(raw);
      return from_hiredis(*static_cast<const redisReply*>(raw));
    }
    switch (wait_for(fd(), POLLIN, until, wake_fd)) {
      case Ready::timeout:
      case Ready::wake:
        return std::nullopt;
      case Ready::fd:
        break;
    }
    if (redisBufferRead(context_) != REDIS_OK) {
      fail(Failure::io,
           context_->err == REDIS_ERR_EOF ? "the server closed the connection" : context_->errstr);
    }
  }
}

Reply Connection::read_reply(Clock::time_point deadline) {
  auto reply = poll_reply(deadline);
  // The reply may still come and would then answer the next request: never reuse.
  if (!reply) fail(Failure::timeout, "no reply");
  return std::move(*reply);
}

Reply Connection::command(std::span<const std::string_view> args, Clock::time_point deadline) {
  append(args);
  flush(deadline);
  return read_reply(deadline);
}

Reply Connection::command(std::span<const std::string> args, Clock::time_point deadline) {
  append(args);
  flush(deadline);
  return read_reply(deadline);
}

void Connection::shutdown_write() {
  broken_ = true;
  ::shutdown(fd(), SHUT_WR);
}

bool Connection::reusable() {
  if (broken_ || failed_ || !out_.empty()) return false;
  // Unread bytes (buffered, or on the socket) mean the conversation is out of step;
  // a readable socket with nothing buffered usually means the peer closed it.
  const redisReader* reader = context_->reader;
  if (reader != nullptr && reader->len > reader->pos) return false;
  pollfd p{fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace warden::engines::resp_client
