// The conformance suite against redis://, a real redis-server started for each test on
// a free loopback port with a temp dir of its own and no persistence.
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "support/redis_server.h"

namespace warden::conformance {
namespace {

class RedisBackend final : public Backend {
 public:
  std::string uri() const override { return server_.uri(); }

  // Behind the clients' back, as an operator or an eviction could: delete every key
  // the engine keeps for the lock. They share the lock's hash tag `{warden:GROUP/NAME}`
  // (holders, info, queue, waiters, admitted waiters).
  bool drop_grants(std::string_view group, std::string_view name) override {
    const std::string tag = testing::lock_tag(group, name);
    try {
      testing::RedisProbe probe(server_);
      const std::string deleted =
          probe.command({"DEL", tag + ":h", tag + ":i", tag + ":q", tag + ":w", tag + ":p"});
      return deleted.rfind("(error)", 0) != 0;
    } catch (const std::runtime_error&) {
      return false;
    }
  }

 private:
  testing::RedisServer server_;
};

INSTANTIATE_TEST_SUITE_P(Redis, Conformance,
                         ::testing::Values(EngineCase{
                             "Redis", [] { return std::make_unique<RedisBackend>(); }}),
                         name_printer);

}  // namespace
}  // namespace warden::conformance
