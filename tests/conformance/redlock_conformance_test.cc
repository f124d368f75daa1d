// The conformance suite against redlock://, on real redis-server masters (one set per case kind
// and test process) on free loopback ports with temp dirs of their own and no persistence:
// three masters (quorum 2) and five (quorum 3); and against redis://…?layout=simple,
// the same engine on one server with the classic lock's key names. A generous node timeout keeps a
// slow sanitizer build from losing rounds; short retry delays make hand-offs quick, since a
// redlock:// waiter polls.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "conformance/multi_lock_suite.h"
#include "support/redis_masters.h"
#include "support/redis_server.h"

namespace warden::conformance {
namespace {

// Redlock: exclusive only, no queue (so no FIFO and no lock-delay); tokens are kept
// monotonic on a quorum (docs/engines/redlock.md).
constexpr Capabilities kRedlock{.shared = false,
                                .fair = false,
                                .non_fair = true,
                                .lock_delay = false,
                                .fencing = true,
                                .durable_tokens = true,
                                .check = true};

class RedlockBackend final : public Backend {
 public:
  explicit RedlockBackend(int masters) : masters_(masters) {}

  // A master's part of a round may take up to a second: on two loaded cores under the
  // sanitizers an answer can stall past a quarter second, and a vote or a release that
  // times out then leaves a probe's try split or a key until its TTL. This suite checks
  // the contract; slow and frozen masters are the redlock engine suite's.
  std::string uri() const override {
    return masters_.uri("node_timeout_ms=1000&retry_delay_ms=2&retry_jitter_ms=3");
  }
  bool reached_only_at_its_uri() const override { return true; }

  // Behind the clients' back, as an operator or an eviction could: delete the lock's
  // grant key (":rl") on every master. Its fence counter (":rf") stays, as it does
  // after any grant.
  bool drop_grants(std::string_view group, std::string_view name) override {
    masters_.drop(group, name);
    return true;
  }

  // Redlock keeps no queue: waiters poll.
  std::optional<std::size_t> queued(std::string_view /*group*/,
                                    std::string_view /*name*/) override {
    return std::nullopt;
  }

  bool freeze() override {
    for (int i = 0; i < masters_.size(); ++i) masters_.server(i).pause();
    return true;
  }
  void thaw() override {
    for (int i = 0; i < masters_.size(); ++i) masters_.server(i).resume();
  }

 private:
  testing::RedisMasters masters_;
};

// redis://…?layout=simple: one redis-server, the lock in the key GROUP:NAME.
class RedisSimpleBackend final : public Backend {
 public:
  std::string uri() const override { return server_.uri() + "?layout=simple"; }
  bool reached_only_at_its_uri() const override { return true; }

  bool drop_grants(std::string_view group, std::string_view name) override {
    testing::RedisProbe probe(server_);
    probe.command({"DEL", std::string(group) + ":" + std::string(name)});
    return true;
  }

  std::optional<std::size_t> queued(std::string_view /*group*/,
                                    std::string_view /*name*/) override {
    return std::nullopt;
  }

  bool freeze() override {
    server_.pause();
    return true;
  }
  void thaw() override { server_.resume(); }

 private:
  testing::RedisServer server_;
};

INSTANTIATE_TEST_SUITE_P(
    Redlock, Conformance,
    ::testing::Values(
        EngineCase{"Redlock3", kRedlock, [] { return std::make_unique<RedlockBackend>(3); }},
        EngineCase{"Redlock5", kRedlock, [] { return std::make_unique<RedlockBackend>(5); }},
        EngineCase{"RedisSimple", kRedlock, [] { return std::make_unique<RedisSimpleBackend>(); }}),
    name_printer);

INSTANTIATE_TEST_SUITE_P(Redlock, MultiLockConformance,
                         ::testing::Values(EngineCase{
                             "Redlock3", kRedlock,
                             [] { return std::make_unique<RedlockBackend>(3); }}),
                         name_printer);

}  // namespace
}  // namespace warden::conformance
