#include "support/wardend_probe.h"

#include <hiredis/hiredis.h>

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string_view>

namespace warden::testing {
namespace {

struct FreeContext {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ContextPtr = std::unique_ptr<redisContext, FreeContext>;
using ReplyPtr = std::unique_ptr<redisReply, FreeReply>;

ReplyPtr command(redisContext* c, std::initializer_list<std::string_view> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (!reply) throw std::runtime_error(std::string("wardend probe: ") + c->errstr);
  if (reply->type == REDIS_REPLY_ERROR) {
    throw std::runtime_error("wardend probe: " + std::string(reply->str, reply->len));
  }
  return reply;
}

ContextPtr connect(std::uint16_t port, const std::string& password) {
  ContextPtr c(redisConnectWithTimeout("127.0.0.1", port, timeval{5, 0}));
  if (!c || c->err != 0) throw std::runtime_error("wardend probe: cannot connect");
  redisSetTimeout(c.get(), timeval{5, 0});
  if (!password.empty()) command(c.get(), {"AUTH", password});
  return c;
}

}  // namespace

WardendProbe::WardendProbe(std::uint16_t port, std::string password)
    : port_(port), password_(std::move(password)) {}

WardendProbe::LockState WardendProbe::inspect(const std::string& key) const {
  const ContextPtr c = connect(port_, password_);
  const ReplyPtr r = command(c.get(), {"INSPECT", key});
  // [ "holders", [[mode, token, ms_left], ...], "waiters", [[mode, ms], ...], ... ]
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 4) {
    throw std::runtime_error("wardend probe: unexpected INSPECT reply");
  }
  LockState state;
  const redisReply* holders = r->element[1];
  for (std::size_t i = 0; i < holders->elements; ++i) {
    state.holder_tokens.push_back(
        static_cast<std::uint64_t>(holders->element[i]->element[1]->integer));
  }
  state.waiters = r->element[3]->elements;
  return state;
}

std::int64_t WardendProbe::info(const std::string& field) const {
  const ContextPtr c = connect(port_, password_);
  const ReplyPtr r = command(c.get(), {"INFO"});
  const std::string text(r->str, r->len);
  const std::string prefix = field + ":";
  for (std::size_t pos = 0; pos < text.size();) {
    const auto end = text.find("\r\n", pos);
    const std::string line = text.substr(pos, end - pos);
    if (line.rfind(prefix, 0) == 0) return std::stoll(line.substr(prefix.size()));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  throw std::runtime_error("wardend probe: INFO has no field " + field);
}

bool WardendProbe::release(const std::string& key, std::uint64_t token,
                           const std::string& secret) const {
  const ContextPtr c = connect(port_, password_);
  return command(c.get(), {"RELEASE", key, std::to_string(token), secret})->integer == 1;
}

}  // namespace warden::testing
