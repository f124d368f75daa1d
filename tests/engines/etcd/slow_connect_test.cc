// etcd:// when a member is slow to answer a new connection (a loaded machine, a long GC
// pause, a slow link): the connection is made within the call's budget, not given up
// after gRPC's own 100 ms. Between the client and etcd sits the torture suite's relay
// (torture/partition_proxy.h): while it is cut it accepts connections and forwards
// nothing, so the client's TCP connect succeeds and etcd's HTTP/2 SETTINGS frame comes
// only once the relay heals.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "torture/partition_proxy.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

// Longer than the 100 ms gRPC gave a connection attempt before, well within op_timeout.
constexpr auto kSilence = 600ms;

TEST(EtcdSlowConnect, OpenWaitsForAMemberThatAnswersItsConnectionLateWithinOpTimeout) {
  EtcdCluster cluster;
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  const std::string uri = torture::proxied_url(cluster.uri(), relays);
  relays.front()->cut();
  auto opened =
      std::async(std::launch::async, [&] { return Client::open(uri, quick_options(5000ms)); });
  std::this_thread::sleep_for(kSilence);
  relays.front()->heal();
  Client client = opened.get();  // before the fix: unavailable, "timed out before SETTINGS"
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(5s));
  EXPECT_TRUE(lease);
}

// The same for a client already open whose connection broke: the next acquire connects
// anew through a relay that is slow to answer, within the acquire's own budget.
TEST(EtcdSlowConnect, AnAcquireAfterABrokenConnectionWaitsForASlowReconnectWithinItsDeadline) {
  EtcdCluster cluster;
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  const std::string uri = torture::proxied_url(cluster.uri(), relays);
  Client client = Client::open(uri, quick_options(5000ms));
  ASSERT_TRUE(client.lock("g", "x").acquire(Mode::exclusive, Wait::none()));

  relays.front()->drop_connections();  // every connection closed: gRPC connects anew
  relays.front()->cut();
  auto acquired = std::async(std::launch::async, [&] {
    return client.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(5s));
  });
  std::this_thread::sleep_for(kSilence);
  relays.front()->heal();
  EXPECT_TRUE(acquired.get());
}

// Every new connection answered late, not only the first: a connection attempt itself
// must get op_timeout, or every retry times out the same way. Later than the longest
// pause between gRPC's attempts (1 s, which gRPC would otherwise also give an attempt).
constexpr auto kLateAnswer = 1500ms;

TEST(EtcdSlowConnect, EveryConnectionAnsweredLateIsStillMadeWithinOpTimeout) {
  EtcdCluster cluster;
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  const std::string uri = torture::proxied_url(cluster.uri(), relays);
  relays.front()->delay_new_connections(kLateAnswer);
  Client client = Client::open(uri, quick_options(5000ms));  // before: unavailable
  ASSERT_TRUE(client.lock("g", "x").acquire(Mode::exclusive, Wait::none()));

  relays.front()->drop_connections();  // the next acquire connects anew, late again
  EXPECT_TRUE(client.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(5s)));
}

}  // namespace
}  // namespace warden::testing
