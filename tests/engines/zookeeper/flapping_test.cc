// zk:// while its connection keeps breaking: a relay in front of the server closes every
// connection again and again (a NAT or middlebox that keeps dropping its state). The
// session survives each break (the client reconnects within the session timeout), and a
// request under way when one comes gets ZCONNECTIONLOSS. An acquire whose deadline has
// not passed waits for the session to connect again and goes on, at every step: the
// lock's parent nodes, its request node, the wait; it never fails for a break.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "support/async_outcome.h"
#include "test_util.h"
#include "torture/partition_proxy.h"
#include "warden/async.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(ZkFlapping, AnAcquireWithTimeLeftGoesOnAcrossConnectionsThatBreakUnderIt) {
  ZooKeeperEnsemble zk;
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  Client client = Client::open(torture::proxied_url(zk.uri(), relays), with_ttl(10s));
  std::jthread breaker([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(150ms);
      for (auto& relay : relays) relay->drop_connections();
    }
  });
  // Each name is new: its parent nodes are made under the breaks too.
  int granted = 0;
  for (int i = 0; i < 30; ++i) {
    const std::string name = "n" + std::to_string(i);
    try {
      Lease lease = client.lock("g", name).acquire(Mode::exclusive, Wait::up_to(30s));
      EXPECT_TRUE(lease) << name << ": a free lock was not granted within 30 s";
      granted += lease ? 1 : 0;
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": an acquire with time left failed: " << e.what();
    }
  }
  breaker.request_stop();
  EXPECT_EQ(granted, 30);
}

// The same for asynchronous acquires (engines/zookeeper/async_waits.h), all under way at
// once: a create whose answer a break lost is made again under a fresh GUID once the
// session is connected, and the node the lost one may have made is deleted by the
// engine; every acquire is granted, and once all are released no request node is left.
TEST(ZkFlapping, AsyncAcquiresWithTimeLeftGoOnAcrossConnectionsThatBreakUnderThem) {
  constexpr int kLocks = 30;
  std::vector<AsyncOutcome> outcomes(kLocks);  // before the Clients, whose waits tell it
  ZooKeeperEnsemble zk;
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  Client client = Client::open(torture::proxied_url(zk.uri(), relays), with_ttl(10s));
  std::jthread breaker([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(150ms);
      for (auto& relay : relays) relay->drop_connections();
    }
  });
  std::vector<AcquireHandle> handles;
  for (int i = 0; i < kLocks; ++i) {
    handles.push_back(
        client.lock("g", "a" + std::to_string(i))
            .acquire_async(Mode::exclusive, Wait::up_to(30s), outcomes[i].callback()));
  }
  for (int i = 0; i < kLocks; ++i) {
    EXPECT_TRUE(outcomes[i].told_granted(40s)) << "a" << i << ": not granted";
  }
  breaker.request_stop();
  breaker.join();
  // Each lease went as it was told; nodes of lost creates go by the engine's maintainer.
  EXPECT_TRUE(eventually(
      [&] {
        for (int i = 0; i < kLocks; ++i) {
          if (requests(zk, "g", "a" + std::to_string(i)) != 0) return false;
        }
        return true;
      },
      30s))
      << "left:" << describe(warden_tree(zk));
}

}  // namespace
}  // namespace warden::testing
