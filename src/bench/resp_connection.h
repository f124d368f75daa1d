// bench/resp_connection.h — a plain blocking RESP connection (hiredis underneath) for the
// parts of `warden bench` and `warden status` that talk to a server directly instead of
// through warden::Client: the raw single-Redis baseline, wardend's capacity checks,
// INFO and INSPECT.
//
// Every call is bounded by the timeout given to open(). Transport failures and error
// replies are translated into warden::Error here, in one place:
//
//   what went wrong                                 Errc
//   ----------------------------------------------  -------------------
//   connect refused / unreachable, connection lost   unavailable
//   no answer within the timeout                     deadline_exceeded
//   NOAUTH, WRONGPASS, NOPERM                        permission_denied
//   INVALID (wardend)                                invalid_argument
//   LIMIT (wardend), OOM (Redis)                     resource_exhausted
//   STARTING (wardend), LOADING, BUSY                unavailable
//   any other error reply, a reply of the wrong shape internal
//
// Error replies are returned by command()/read() as replies; the expect_*() helpers
// turn them (and wrong shapes) into Errors.
//
// Thread safety: none; one thread per connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct redisContext;
struct redisReply;

namespace warden::bench {

struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
  std::optional<std::string> user;      // Redis 6 ACL user (AUTH user password)
  std::optional<std::string> password;  // AUTH password right after connecting
  int db = 0;                           // SELECT db after connecting when > 0 (Redis)
  // "host:port", for messages.
  std::string name() const;
};

// The endpoint of a one-host URL with scheme "warden" (wardend: no user, no path; a
// query such as ?pool=N is for warden::Client and ignored here) or "redis" (optional
// user, /DB path). Throws Error(invalid_argument) naming what is wrong.
Endpoint endpoint_of(std::string_view url);
// Every host of a warden:// URL (a cell's members; one for a single wardend), each with
// the URL's password, or of a one-host redis:// URL. Throws as endpoint_of does.
std::vector<Endpoint> endpoints_of(std::string_view url);

struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept;
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class RespConnection {
 public:
  // Connects, then AUTHs and SELECTs as `endpoint` says; `timeout` bounds the connect
  // and every later read or write. Throws Error (see the table above).
  static RespConnection open(const Endpoint& endpoint, std::chrono::milliseconds timeout);

  RespConnection(RespConnection&& other) noexcept;
  RespConnection& operator=(RespConnection&& other) noexcept;
  RespConnection(const RespConnection&) = delete;
  RespConnection& operator=(const RespConnection&) = delete;
  ~RespConnection();

  // Sends one command (binary-safe arguments) and returns its reply; an error reply is
  // a reply. Throws Error for a transport failure (the connection is then unusable).
  ReplyPtr command(std::span<const std::string_view> args);
  ReplyPtr command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
  }

  // Pipelining: append() buffers a command without I/O; read() sends what is buffered
  // and returns the next reply, in order.
  void append(std::span<const std::string_view> args);
  void append(std::initializer_list<std::string_view> args) {
    append(std::span<const std::string_view>(args.begin(), args.size()));
  }
  ReplyPtr read();
  // Sends what append() buffered without waiting for replies.
  void flush();

  const std::string& endpoint() const { return endpoint_; }

 private:
  RespConnection(redisContext* context, std::string endpoint);
  [[noreturn]] void fail(std::string_view during);

  redisContext* context_ = nullptr;
  std::string endpoint_;
};

// The reply as text for messages, like redis-cli prints it, cut after ~200 bytes.
std::string describe(const redisReply& reply);

// wardend's INFO text as its "key:value" fields, in order.
std::vector<std::pair<std::string, std::string>> parse_info(const std::string& text);

// Throws the Error an error reply stands for, or Error(internal) for a reply of the
// wrong shape; `what` names the command and server ("SET on 127.0.0.1:6379").
[[noreturn]] void reject_reply(const redisReply& reply, std::string_view what);

// Checked accessors: they return the value or call reject_reply().
void expect_status(const redisReply& reply, std::string_view what);  // any +status
long long expect_integer(const redisReply& reply, std::string_view what);
std::string expect_text(const redisReply& reply, std::string_view what);  // bulk or status
const redisReply& expect_array(const redisReply& reply, std::string_view what);

}  // namespace warden::bench
