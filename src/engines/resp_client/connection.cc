#include "engines/resp_client/connection.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "engines/resp_client/hiredis_reply.h"
#include "engines/resp_client/tls_context.h"
#include "engines/resp_client/tls_transport.h"
#include "engines/resp_client/transport.h"
#include "engines/resp_client/wait.h"

namespace warden::engines::resp_client {
namespace {

// As much as hiredis' own redisBufferRead takes per read.
constexpr std::size_t kReadChunk = 16 * 1024;
// The most an emptied send buffer keeps of what it grew to.
constexpr std::size_t kKeptOutCapacity = 64 * 1024;

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
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
    : context_(context), transport_(plain_transport(context->fd)), endpoint_(std::move(endpoint)) {}

Connection::~Connection() {
  transport_.reset();  // a TLS transport says goodbye on the socket before it closes
  redisFree(context_);
}

int Connection::fd() const { return context_->fd; }

bool Connection::has_buffered() const { return transport_->has_buffered(); }

bool Connection::secure() const { return transport_->secure(); }

std::unique_ptr<Connection> Connection::open(const ConnectOptions& options,
                                             std::shared_ptr<const TlsContext> tls) {
  const std::string endpoint = endpoint_name(options.host, options.port);
  const auto deadline = Clock::now() + options.timeout;
  // Files first: a certificate that cannot be used is the caller's to fix, whether or
  // not the server is up.
  if (options.tls.enabled && !tls) tls = TlsContext::create(options.tls, endpoint);
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

  bool confirm_tls = false;
  if (options.tls.enabled) {
    TlsSession session =
        tls_handshake(std::move(tls), context->fd, options.host, endpoint, deadline);
    conn->transport_ = std::move(session.transport);
    confirm_tls = session.needs_round_trip;
  }

  if (options.password) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (options.user) auth.push_back(*options.user);
    auth.push_back(*options.password);
    const Reply reply = conn->command(auth, deadline);
    if (reply.is_error()) throw auth_error(reply, endpoint);
    confirm_tls = false;
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
    confirm_tls = false;
  }
  if (confirm_tls) conn->confirm_certificate(options.tls, deadline);
  return conn;
}

void Connection::confirm_certificate(const core::TlsOptions& tls, Clock::time_point deadline) {
  // A TLS 1.3 server judges our certificate after our side of the handshake is done,
  // and answers with its session tickets, or with an alert. Listen first: a request
  // sent meanwhile can make the server's kernel reset the connection, which loses
  // the alert. A server that sends no tickets gets a PING after a quarter of the time.
  try {
    const auto now = Clock::now();
    const auto first_look = now + (deadline - now) / 4;
    short want = POLLIN;
    if (wait_for(fd(), POLLIN, first_look) == Ready::fd) {
      read_some(want);
      return;
    }
    const std::string_view ping[] = {"PING"};
    command(std::span<const std::string_view>(ping), deadline);  // any reply will do
  } catch (const Error& e) {
    if (e.code() != Errc::unavailable) throw;
    // Closed or reset without an alert, right after a handshake in which it asked for
    // our certificate: the certificate is what it did not accept.
    throw Error(Errc::permission_denied,
                "the server at " + endpoint_ +
                    (tls.cert_file ? " refused our client certificate '" + *tls.cert_file + "'"
                                   : " requires a client certificate (give cert=FILE&key=FILE)") +
                    ": it closed the connection after the TLS handshake (" + e.what() + ")");
  }
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
    IoResult result = transport_->write(out_.data() + sent, out_.size() - sent);
    switch (result.status) {
      case IoResult::ok:
        sent += result.bytes;
        continue;
      case IoResult::want_read:
      case IoResult::want_write: {
        const short events = result.status == IoResult::want_read ? POLLIN : POLLOUT;
        if (wait_for(fd(), events, deadline) == Ready::timeout) {
          fail(Failure::timeout, "the request could not be sent");
        }
        continue;
      }
      case IoResult::closed:
      case IoResult::failed:
        failed_ = true;
        if (result.code != Errc::unavailable) throw Error(result.code, result.detail);
        fail(Failure::io,
             result.detail.empty() ? "the server closed the connection" : result.detail);
    }
  }
  out_.clear();
  // A burst (thousands of waits asked at once) grows the buffer to megabytes; kept, that
  // would stay with the connection for its life (docs/performance.md, *Heap in use per
  // wait*). Rounds of ordinary size keep theirs and allocate nothing.
  if (out_.capacity() > kKeptOutCapacity) std::string().swap(out_);
}

bool Connection::read_some(short& want) {
  char buf[kReadChunk];
  IoResult result = transport_->read(buf, sizeof buf);
  switch (result.status) {
    case IoResult::ok:
      received_ = true;
      if (redisReaderFeed(context_->reader, buf, result.bytes) != REDIS_OK) {
        fail(Failure::protocol, context_->reader->errstr);
      }
      return true;
    case IoResult::want_read:
      want = POLLIN;
      return false;
    case IoResult::want_write:
      want = POLLOUT;
      return false;
    case IoResult::closed:
    case IoResult::failed:
      break;
  }
  failed_ = true;
  if (result.code != Errc::unavailable) throw Error(result.code, result.detail);
  std::string why =
      result.status == IoResult::closed ? "the server closed the connection" : result.detail;
  // A TLS server drops a plain client that sent it a request, before any reply.
  if (!received_ && !transport_->secure()) {
    why += " before any reply (if it is a TLS port, connect with tls=1, e.g. rediss://)";
  }
  fail(Failure::io, why);
}

std::optional<Reply> Connection::poll_reply(Clock::time_point until, int wake_fd) {
  if (failed_) fail(Failure::io, "the connection failed earlier");
  short want = POLLIN;
  bool progressed = true;  // the last read brought bytes: the transport may hold more
  while (true) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) {
      fail(Failure::protocol, context_->errstr);
    }
    if (raw != nullptr) {
      const std::unique_ptr<void, FreeReply> owned(raw);
      Reply reply = from_hiredis(*static_cast<const redisReply*>(raw));
      if (reply.error_code() == "NOAUTH") retired_ = true;
      return reply;
    }
    // Bytes the transport holds already (TLS) are not announced by poll().
    if (!progressed || !transport_->has_buffered()) {
      switch (wait_for(fd(), want, until, wake_fd)) {
        case Ready::timeout:
        case Ready::wake:
          return std::nullopt;
        case Ready::fd:
          break;
      }
    }
    want = POLLIN;
    progressed = read_some(want);
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
  transport_->shutdown_write();
}

bool Connection::in_step() const {
  if (broken_ || failed_ || retired_ || !out_.empty()) return false;
  // Unread bytes (buffered, or on the socket: see reusable()) mean the conversation is
  // out of step.
  const redisReader* reader = context_->reader;
  return reader == nullptr || reader->len <= reader->pos;
}

bool Connection::reusable() {
  if (!in_step()) return false;
  if (!transport_->has_buffered()) {
    pollfd p{fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) return true;
  }
  // Something arrived. A plain socket has a stray reply or the peer's close; a TLS one
  // may hold only records without application data (a TLS 1.3 session ticket), which
  // the read consumes. Only application bytes or a close make the connection unfit.
  short want = POLLIN;
  try {
    return !read_some(want) && !transport_->has_buffered();
  } catch (const Error&) {
    return false;  // closed or failed: read_some marked it
  }
}

}  // namespace warden::engines::resp_client
