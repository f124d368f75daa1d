// resp_client::Pool against a real redis-server: a connection comes back to the pool
// without a system call, so whether the server closed it is looked at when it is taken
// again — it is then never handed out, and one out of step is never kept.
#include "engines/resp_client/pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string_view>
#include <vector>

#include "engines/resp_client/connector.h"
#include "support/redis_server.h"

namespace warden::engines::resp_client {
namespace {

using namespace std::chrono_literals;

struct PooledServer {
  testing::RedisServer redis;
  std::shared_ptr<Connector> connector;
  Pool pool;

  PooledServer() : connector(make_connector(redis)), pool(connector, 2) {}

  static std::shared_ptr<Connector> make_connector(const testing::RedisServer& redis) {
    ConnectOptions options;
    options.host = "127.0.0.1";
    options.port = redis.port();
    options.timeout = 5s;
    return std::make_shared<Connector>(options, RetryPolicy{});
  }

  // A PING on a connection taken from the pool; it goes back afterwards.
  std::string ping() {
    auto handle = pool.take(Clock::now() + 5s, {});
    if (!handle) return "(no connection)";
    const std::vector<std::string_view> ping{"PING"};
    return (*handle)->command(ping, Clock::now() + 5s).text;
  }
};

TEST(Pool, AConnectionTheServerClosedWhileIdleIsNotHandedOutAgain) {
  PooledServer server;
  ASSERT_EQ(server.ping(), "PONG");
  ASSERT_EQ(server.pool.idle_count(), 1U);
  testing::RedisProbe probe(server.redis);
  ASSERT_EQ(probe.kill_normal_clients(), 1);
  // Taken again: the closed one is dropped and a new one made, so the request succeeds.
  EXPECT_EQ(server.ping(), "PONG");
  EXPECT_EQ(server.pool.open_count(), 1U) << "the closed connection kept its slot";
}

TEST(Pool, AConnectionOutOfStepIsClosedWhenItComesBack) {
  PooledServer server;
  {
    auto handle = server.pool.take(Clock::now() + 5s, {});
    ASSERT_TRUE(handle);
    const std::vector<std::string_view> ping{"PING"};
    (*handle)->append(ping);  // written into its buffer, never sent: mid-request
  }
  EXPECT_EQ(server.pool.idle_count(), 0U);
  EXPECT_EQ(server.pool.open_count(), 0U);
  EXPECT_EQ(server.ping(), "PONG");
}

}  // namespace
}  // namespace warden::engines::resp_client
