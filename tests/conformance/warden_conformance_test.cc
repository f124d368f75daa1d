// The conformance suite against warden://, a real wardend started for each test on a
// free loopback port with a data dir of its own.
#include <hiredis/hiredis.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "support/server_process.h"

namespace warden::conformance {
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
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

class WardendBackend final : public Backend {
 public:
  std::string uri() const override { return server_.uri(); }

  // Behind the clients' back, as another holder of the token could: INSPECT the lock,
  // then RELEASE every holder's token.
  bool drop_grants(std::string_view group, std::string_view name) override {
    const ContextPtr c(redisConnectWithTimeout("127.0.0.1", server_.port(), timeval{5, 0}));
    if (!c || c->err != 0) return false;
    std::string key(group);
    key += '/';
    key += name;
    const ReplyPtr info = command(c.get(), {"INSPECT", key});
    // [ "holders", [[mode, token, ms_left], ...], "waiters", [...], "delayed_ms", n ]
    if (!info || info->type != REDIS_REPLY_ARRAY || info->elements < 2) return false;
    const redisReply* holders = info->element[1];
    if (holders->type != REDIS_REPLY_ARRAY) return false;
    for (std::size_t i = 0; i < holders->elements; ++i) {
      const redisReply* holder = holders->element[i];
      if (holder->type != REDIS_REPLY_ARRAY || holder->elements < 2) return false;
      const std::string token = std::to_string(holder->element[1]->integer);
      const ReplyPtr released = command(c.get(), {"RELEASE", key, token});
      if (!released || released->type != REDIS_REPLY_INTEGER) return false;
    }
    return true;
  }

 private:
  testing::Wardend server_;
};

INSTANTIATE_TEST_SUITE_P(Warden, Conformance,
                         ::testing::Values(EngineCase{
                             "Warden", [] { return std::make_unique<WardendBackend>(); }}),
                         name_printer);

}  // namespace
}  // namespace warden::conformance
