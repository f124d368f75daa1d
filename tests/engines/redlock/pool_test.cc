// redlock:// keeps at most `pool` connections to each master, however many threads
// lock at once: they share them (and wait for one) rather than fail.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

// Connections on master i other than the probe's own.
long engine_connections(RedisMasters& masters, int i) {
  const std::string clients = masters.command(i, {"CLIENT", "LIST"});
  long count = 0;
  for (std::size_t pos = 0; pos < clients.size();) {
    const auto end = clients.find('\n', pos);
    const std::string line = clients.substr(pos, end - pos);
    pos = end == std::string::npos ? clients.size() : end + 1;
    if (line.find(" cmd=client|list ") == std::string::npos) ++count;
  }
  return count;
}

TEST(RedlockPool, ManyThreadsShareAtMostPoolConnectionsPerMaster) {
  RedisMasters masters(3);
  // Not about timeouts: eight threads share two connections per master. A Redlock round
  // waits node_timeout_ms (default 100 ms) for each master, and beside two CPU hogs and
  // the sanitizer run two of three masters once answered a release later than that; 3 s
  // is the most a 30 s lease allows (ttl/10). op_timeout bounds a wait for a connection.
  ClientOptions options = redlock_options();
  options.op_timeout = unhurried_options().op_timeout;
  Client client = Client::open(masters.uri("pool=2&node_timeout_ms=3000"), options);
  constexpr int kThreads = 8;
  constexpr int kRounds = 25;
  std::atomic<int> granted{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Lock lock = client.lock("g", "x" + std::to_string(t));  // no contention
      for (int r = 0; r < kRounds; ++r) {
        try {
          Lease lease = lock.acquire(Mode::exclusive, Wait::up_to(10s));
          if (lease) ++granted;
          lease.release();
        } catch (const Error& e) {
          ADD_FAILURE() << "thread " << t << ": " << e.what();
          ++errors;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(granted.load(), kThreads * kRounds);
  EXPECT_EQ(errors.load(), 0);
  for (int i = 0; i < masters.size(); ++i) {
    EXPECT_LE(engine_connections(masters, i), 2) << "m" << i << " has more connections than pool=2";
  }
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
