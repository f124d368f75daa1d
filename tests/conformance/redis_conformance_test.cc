// The conformance suite against redis://, a real redis-server started for each test on
// a free loopback port with a temp dir of its own and no persistence; and once more
// over TLS (rediss://, the server's TLS port, certificates from support/test_certs.h),
// so every clause also holds when the bytes go through OpenSSL.
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "conformance/backend.h"
#include "conformance/conformance_suite.h"
#include "support/redis_server.h"
#include "support/test_certs.h"

namespace warden::conformance {
namespace {

// redis:// offers every capability; tokens are floored at the server's clock, so they
// do not go back after a restart that lost data (docs/engines/redis.md).
constexpr Capabilities kRedis{.shared = true,
                              .fair = true,
                              .non_fair = true,
                              .lock_delay = true,
                              .fencing = true,
                              .durable_tokens = true,
                              .check = true};

// A server with a TLS port too, trusting the test CA (no client certificates).
testing::RedisOptions tls_server() {
  const testing::TestCerts& certs = testing::TestCerts::shared();
  testing::RedisOptions options;
  options.tls =
      testing::RedisTlsOptions{certs.server().cert, certs.server().key, certs.ca().cert, false};
  return options;
}

class RedisBackend final : public Backend {
 public:
  // tls: clients connect to the TLS port (rediss://); probes keep the plain one.
  explicit RedisBackend(bool tls = false)
      : tls_(tls), server_(tls ? tls_server() : testing::RedisOptions{}) {}

  std::string uri() const override { return tls_ ? server_.tls_uri() : server_.uri(); }

  // Behind the clients' back, as an operator or an eviction could: delete every key
  // the engine keeps for the lock. They share the lock's hash tag `{warden:GROUP/NAME}`
  // (holders, info, queue, waiters, admitted waiters).
  bool drop_grants(std::string_view group, std::string_view name) override {
    const std::string tag = testing::lock_tag(group, name);
    testing::RedisProbe probe(server_);
    const std::string deleted =
        probe.command({"DEL", tag + ":h", tag + ":i", tag + ":q", tag + ":w", tag + ":p"});
    if (deleted.rfind("(error)", 0) == 0) throw std::runtime_error("DEL answered " + deleted);
    return true;
  }

  // The lock's waiters sorted set (":w"): every waiter, fair or not, until it is
  // admitted or gives up. (":q", the list, holds the fair waiters only.)
  std::optional<std::size_t> queued(std::string_view group, std::string_view name) override {
    testing::RedisProbe probe(server_);
    const std::string reply = probe.command({"ZCARD", testing::lock_tag(group, name) + ":w"});
    try {
      return static_cast<std::size_t>(std::stoull(reply));
    } catch (const std::exception&) {
      throw std::runtime_error("ZCARD answered " + reply);
    }
  }

 private:
  const bool tls_;
  testing::RedisServer server_;
};

INSTANTIATE_TEST_SUITE_P(
    Redis, Conformance,
    ::testing::Values(EngineCase{"Redis", kRedis, [] { return std::make_unique<RedisBackend>(); }},
                      EngineCase{"RedisTls", kRedis,
                                 [] { return std::make_unique<RedisBackend>(true); }}),
    name_printer);

}  // namespace
}  // namespace warden::conformance
