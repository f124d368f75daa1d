#include "bench/resp_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <array>
#include <cerrno>
#include <utility>
#include <vector>

#include "core/uri.h"
#include "warden/error.h"

namespace warden::bench {
namespace {

constexpr std::uint16_t kWardenPort = 7380;
constexpr std::uint16_t kRedisPort = 6379;

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((d.count() % 1000) * 1000);
  return tv;
}

// hiredis wants parallel arrays of pointers and lengths; up to 8 arguments live on the
// stack, so the baseline's hot loop allocates nothing here.
class Argv {
 public:
  explicit Argv(std::span<const std::string_view> args) : count_(args.size()) {
    if (count_ > kInline) {
      heap_ptrs_.resize(count_);
      heap_lens_.resize(count_);
    }
    const char** ptrs = count_ > kInline ? heap_ptrs_.data() : inline_ptrs_.data();
    std::size_t* lens = count_ > kInline ? heap_lens_.data() : inline_lens_.data();
    for (std::size_t i = 0; i < count_; ++i) {
      ptrs[i] = args[i].data();
      lens[i] = args[i].size();
    }
    ptrs_ = ptrs;
    lens_ = lens;
  }
  int argc() const { return static_cast<int>(count_); }
  const char** argv() const { return ptrs_; }
  const std::size_t* lens() const { return lens_; }

 private:
  static constexpr std::size_t kInline = 8;
  std::size_t count_;
  std::array<const char*, kInline> inline_ptrs_{};
  std::array<std::size_t, kInline> inline_lens_{};
  std::vector<const char*> heap_ptrs_;
  std::vector<std::size_t> heap_lens_;
  const char** ptrs_ = nullptr;
  const std::size_t* lens_ = nullptr;
};

Errc errc_of_error_reply(std::string_view text) {
  const std::string_view code = text.substr(0, text.find(' '));
  if (code == "NOAUTH" || code == "WRONGPASS" || code == "NOPERM") return Errc::permission_denied;
  if (code == "INVALID") return Errc::invalid_argument;
  if (code == "LIMIT" || code == "OOM") return Errc::resource_exhausted;
  if (code == "STARTING" || code == "LOADING" || code == "BUSY") return Errc::unavailable;
  return Errc::internal;
}

std::string_view text_of(const redisReply& reply) {
  return reply.str == nullptr ? std::string_view() : std::string_view(reply.str, reply.len);
}

void describe_into(const redisReply& reply, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  switch (reply.type) {
    case REDIS_REPLY_STATUS:
      out += text_of(reply);
      break;
    case REDIS_REPLY_ERROR:
      out += "(error) ";
      out += text_of(reply);
      break;
    case REDIS_REPLY_INTEGER:
      out += "(integer) " + std::to_string(reply.integer);
      break;
    case REDIS_REPLY_NIL:
      out += "(nil)";
      break;
    case REDIS_REPLY_STRING:
      out += '"';
      out += text_of(reply).substr(0, limit);
      out += '"';
      break;
    case REDIS_REPLY_ARRAY:
      out += '[';
      for (std::size_t i = 0; i < reply.elements; ++i) {
        if (i > 0) out += ", ";
        describe_into(*reply.element[i], out, limit);
        if (out.size() > limit) break;
      }
      out += ']';
      break;
    default:
      out += "(unknown reply type " + std::to_string(reply.type) + ")";
  }
}

}  // namespace

std::string Endpoint::name() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::vector<Endpoint> endpoints_of(std::string_view url) {
  const core::Uri uri = core::Uri::parse(url);
  if (uri.scheme != "warden" && uri.scheme != "redis") {
    throw Error(Errc::invalid_argument,
                "expected a warden:// or redis:// URL, got scheme '" + uri.scheme + "'");
  }
  const std::string form = uri.scheme == "warden" ? "warden://[:PASSWORD@]HOST[:PORT]"
                                                  : "redis://[USER:PASSWORD@]HOST[:PORT][/DB]";
  auto invalid = [&](const std::string& why) {
    return Error(Errc::invalid_argument,
                 uri.scheme + ":// URL: " + why + " (expected " + form + ")");
  };
  if (uri.hosts.empty() || (uri.scheme != "warden" && uri.hosts.size() != 1)) {
    throw invalid("exactly one host is needed");
  }
  Endpoint e;
  e.host = uri.hosts[0].host;
  e.port = uri.hosts[0].port.value_or(uri.scheme == "warden" ? kWardenPort : kRedisPort);
  e.password = uri.password;
  if (uri.scheme == "warden") {
    if (uri.user && !uri.user->empty()) throw invalid("wardend has no user names");
    if (!uri.path.empty()) throw invalid("unexpected path '/" + uri.path + "'");
  } else {
    if (uri.user && !uri.user->empty()) e.user = uri.user;
    if (!uri.path.empty()) {
      int db = -1;
      try {
        std::size_t used = 0;
        db = std::stoi(uri.path, &used);
        if (used != uri.path.size()) db = -1;
      } catch (const std::exception&) {
        db = -1;
      }
      if (db < 0) throw invalid("database '" + uri.path + "' is not a number");
      e.db = db;
    }
  }
  if (e.password && e.password->empty()) e.password.reset();
  std::vector<Endpoint> all{e};
  for (std::size_t i = 1; i < uri.hosts.size(); ++i) {
    all.push_back(e);
    all.back().host = uri.hosts[i].host;
    all.back().port = uri.hosts[i].port.value_or(kWardenPort);
  }
  return all;
}

Endpoint endpoint_of(std::string_view url) {
  std::vector<Endpoint> all = endpoints_of(url);
  if (all.size() != 1) {
    throw Error(
        Errc::invalid_argument,
        "warden:// URL: exactly one host is needed (expected warden://[:PASSWORD@]HOST[:PORT])");
  }
  return all.front();
}

void ReplyDeleter::operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }

RespConnection::RespConnection(redisContext* context, std::string endpoint)
    : context_(context), endpoint_(std::move(endpoint)) {}

RespConnection::RespConnection(RespConnection&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)), endpoint_(std::move(other.endpoint_)) {}

RespConnection& RespConnection::operator=(RespConnection&& other) noexcept {
  if (this != &other) {
    if (context_ != nullptr) redisFree(context_);
    context_ = std::exchange(other.context_, nullptr);
    endpoint_ = std::move(other.endpoint_);
  }
  return *this;
}

RespConnection::~RespConnection() {
  if (context_ != nullptr) redisFree(context_);
}

RespConnection RespConnection::open(const Endpoint& endpoint, std::chrono::milliseconds timeout) {
  const std::string name = endpoint.name();
  redisContext* context =
      redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, to_timeval(timeout));
  if (context == nullptr) {
    throw Error(Errc::resource_exhausted, "cannot connect to " + name + ": out of memory");
  }
  if (context->err != 0) {
    const std::string why = context->errstr;
    redisFree(context);
    throw Error(Errc::unavailable, "cannot connect to " + name + ": " + why);
  }
  RespConnection conn(context, name);
  if (redisSetTimeout(context, to_timeval(timeout)) != REDIS_OK) conn.fail("setting timeouts");
  if (endpoint.password) {
    ReplyPtr reply = endpoint.user ? conn.command({"AUTH", *endpoint.user, *endpoint.password})
                                   : conn.command({"AUTH", *endpoint.password});
    if (reply->type == REDIS_REPLY_ERROR) {
      throw Error(Errc::permission_denied,
                  "AUTH on " + name + " refused: " + std::string(text_of(*reply)));
    }
  }
  if (endpoint.db > 0) {
    const std::string db = std::to_string(endpoint.db);
    expect_status(*conn.command({"SELECT", db}), "SELECT on " + name);
  }
  return conn;
}

void RespConnection::fail(std::string_view during) {
  const int saved_errno = errno;
  const int err = context_->err;
  const std::string why = context_->errstr;
  std::string message = during.empty() ? endpoint_ : std::string(during) + " on " + endpoint_;
  // hiredis reports a read that hit the socket timeout as an I/O error with EAGAIN.
  const bool timed_out = saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
                         why.find("temporarily unavailable") != std::string::npos;
  if (err == REDIS_ERR_IO && timed_out) {
    throw Error(Errc::deadline_exceeded, message + ": no reply within the timeout");
  }
  if (err == REDIS_ERR_PROTOCOL) throw Error(Errc::internal, message + ": " + why);
  if (err == REDIS_ERR_EOF)
    throw Error(Errc::unavailable, message + ": server closed the connection");
  throw Error(Errc::unavailable, message + ": " + why);
}

ReplyPtr RespConnection::command(std::span<const std::string_view> args) {
  const Argv argv(args);
  void* reply = redisCommandArgv(context_, argv.argc(), argv.argv(), argv.lens());
  if (reply == nullptr) fail(args.empty() ? std::string_view() : args[0]);
  return ReplyPtr(static_cast<redisReply*>(reply));
}

void RespConnection::append(std::span<const std::string_view> args) {
  const Argv argv(args);
  if (redisAppendCommandArgv(context_, argv.argc(), argv.argv(), argv.lens()) != REDIS_OK) {
    fail("buffering a command");
  }
}

ReplyPtr RespConnection::read() {
  void* reply = nullptr;
  if (redisGetReply(context_, &reply) != REDIS_OK || reply == nullptr) fail("reading a reply");
  return ReplyPtr(static_cast<redisReply*>(reply));
}

void RespConnection::flush() {
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(context_, &done) != REDIS_OK) fail("sending buffered commands");
  }
}

std::string describe(const redisReply& reply) {
  std::string out;
  describe_into(reply, out, 200);
  if (out.size() > 200) out = out.substr(0, 200) + "...";
  return out;
}

void reject_reply(const redisReply& reply, std::string_view what) {
  if (reply.type == REDIS_REPLY_ERROR) {
    throw Error(errc_of_error_reply(text_of(reply)),
                std::string(what) + ": " + std::string(text_of(reply)));
  }
  throw Error(Errc::internal, std::string(what) + ": unexpected reply " + describe(reply));
}

void expect_status(const redisReply& reply, std::string_view what) {
  if (reply.type != REDIS_REPLY_STATUS) reject_reply(reply, what);
}

long long expect_integer(const redisReply& reply, std::string_view what) {
  if (reply.type != REDIS_REPLY_INTEGER) reject_reply(reply, what);
  return reply.integer;
}

std::string expect_text(const redisReply& reply, std::string_view what) {
  if (reply.type != REDIS_REPLY_STRING && reply.type != REDIS_REPLY_STATUS) {
    reject_reply(reply, what);
  }
  return std::string(text_of(reply));
}

const redisReply& expect_array(const redisReply& reply, std::string_view what) {
  if (reply.type != REDIS_REPLY_ARRAY) reject_reply(reply, what);
  return reply;
}

std::vector<std::pair<std::string, std::string>> parse_info(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> fields;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto colon = line.find(':');
    if (colon != std::string::npos && line[0] != '#') {
      fields.emplace_back(line.substr(0, colon), line.substr(colon + 1));
    }
    pos = end + 1;
  }
  return fields;
}

}  // namespace warden::bench
