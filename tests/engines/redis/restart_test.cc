// redis:// across a redis-server crash and restart without persistence: Redis comes
// back empty, so a held lease is lost at its next renewal, and fencing tokens keep
// increasing because they never fall below the Redis clock in microseconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(RedisRestart, HeldLeaseIsLostAtTheNextRenewalAndTokensKeepIncreasing) {
  RedisServer server;
  RedisProbe probe(server);
  ClientOptions options = quick_options(1000ms);
  options.renew_interval = 300ms;
  // The TTL is far longer than renewal + op_timeout, so a loss well before it ran out
  // can only come from the refused renewal, not from the lease running out.
  options.lock_defaults.ttl = 30s;
  Client client = Client::open(server.uri(), options);

  // Earlier grants, so the new token has more than one to beat.
  std::vector<std::uint64_t> earlier;
  for (int i = 0; i < 3; ++i) {
    Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    earlier.push_back(lease.token());
  }
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  earlier.push_back(held.token());
  std::atomic<bool> callback_ran{false};
  held.on_lost([&] { callback_ran = true; });

  server.kill9();
  server.start();
  const auto restarted = Clock::now();
  EXPECT_TRUE(probe.warden_keys().empty())
      << "the restart kept data:" << describe(probe.warden_keys());

  // Half the TTL: the lease is still running on the client's clock, so a loss by then
  // was told by Redis (the renewal found no grant), not by the lease running out.
  const auto bound = options.lock_defaults.ttl / 2;
  ASSERT_TRUE(eventually([&] { return held.lost_token().stop_requested(); }, bound))
      << "the lease was not reported lost " << seconds(bound) << " s after the restart";
  ASSERT_LT(Clock::now() - restarted, options.lock_defaults.ttl);
  EXPECT_TRUE(eventually([&] { return callback_ran.load(); }, kPrompt)) << "on_lost did not run";
  EXPECT_NO_THROW(held.release());

  Lease next = client.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(2s));
  ASSERT_TRUE(next) << "no grant on the restarted server";
  EXPECT_GT(next.token(), *std::max_element(earlier.begin(), earlier.end()))
      << "fencing tokens went back across the restart";
  next.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

TEST(RedisRestart, PersistentServerKeepsTheLeaseAcrossARestart) {
  RedisOptions persistent;
  persistent.persistence = true;
  RedisServer server(persistent);
  RedisProbe probe(server);
  ClientOptions options = quick_options(1000ms);
  options.renew_interval = 200ms;
  options.lock_defaults.ttl = 5s;
  Client client = Client::open(server.uri(), options);
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  server.kill9();
  server.start();
  // Several renewals reach the restarted server, which still has the grant (AOF).
  std::this_thread::sleep_for(4 * options.renew_interval);
  EXPECT_FALSE(held.lost()) << "a grant that survived the restart was reported lost";
  EXPECT_TRUE(client.check(held.sequencer()));
  const std::uint64_t token = held.token();
  held.release();
  Lease next = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  next.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing
