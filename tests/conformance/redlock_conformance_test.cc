// The conformance suite against redlock://, on real redis-server masters started for
// each test on free loopback ports with temp dirs of their own and no persistence:
// three masters (quorum 2) and five (quorum 3). A generous node timeout keeps a slow
// sanitizer build from losing rounds; short retry delays make hand-offs quick, since a
// redlock:// waiter polls.
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "support/redis_masters.h"

namespace warden::conformance {
namespace {

class RedlockBackend final : public Backend {
 public:
  explicit RedlockBackend(int masters) : masters_(masters) {}

  std::string uri() const override {
    return masters_.uri("node_timeout_ms=250&retry_delay_ms=2&retry_jitter_ms=3");
  }

  // Behind the clients' back, as an operator or an eviction could: delete the lock's
  // grant key (":rl") on every master. Its fence counter (":rf") stays, as it does
  // after any grant.
  bool drop_grants(std::string_view group, std::string_view name) override {
    try {
      masters_.drop(group, name);
      return true;
    } catch (const std::runtime_error&) {
      return false;
    }
  }

 private:
  testing::RedisMasters masters_;
};

INSTANTIATE_TEST_SUITE_P(
    Redlock, Conformance,
    ::testing::Values(EngineCase{"Redlock3", [] { return std::make_unique<RedlockBackend>(3); }},
                      EngineCase{"Redlock5", [] { return std::make_unique<RedlockBackend>(5); }}),
    name_printer);

}  // namespace
}  // namespace warden::conformance
