// etcd:// when the URI is wrong, nobody answers, the cluster refuses our credentials,
// or the member a client talks to goes away: every call ends with the right Error
// within op_timeout, never a hang, and a client whose URI lists a live member works.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

#include "support/server_process.h"
#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(EtcdFailure, BadUriFailsOpenWithInvalidArgumentBeforeConnecting) {
  // Port 1 refuses connections (unavailable): invalid_argument shows the URI was
  // refused before any connection was tried.
  for (const std::string bad : {
           "etcd://",                         // no host
           "etcd://127.0.0.1:1?ttl=5",        // no query parameters
           "etcd://root@127.0.0.1:1",         // a user needs a password
           "etcd://:secret@127.0.0.1:1",      // ...and a password a user
           "etcd://root:@127.0.0.1:1",        // empty password
           "etcd://127.0.0.1:1//x",           // empty prefix segment
           "etcd://127.0.0.1:1/a//b",         //
           "etcd://127.0.0.1:1/%00x",         // NUL in the prefix
           "etcd://127.0.0.1:0",              // port 0
           "etcd://127.0.0.1:70000",          // port out of range
           "etcd://127.0.0.1:notaport",       //
           "etcd://127.0.0.1:1,",             // trailing ',' in the host list
           "etcd://127.0.0.1:1,,127.0.0.1:2", // empty host
       }) {
    try {
      (void)Client::open(bad, quick_options());
      ADD_FAILURE() << "opened " << bad;
    } catch (const Error& e) {
      // invalid_argument, not unavailable: refused by the URI check, never tried.
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad << ": " << e.what();
    }
  }
}

TEST(EtcdFailure, UnreachableEndpointFailsOpenWithUnavailableWithinOpTimeout) {
  const ClientOptions options = quick_options(1000ms);
  const std::string one = "127.0.0.1:" + std::to_string(free_port());
  const std::string two = "127.0.0.1:" + std::to_string(free_port());
  auto took = fails_with(Errc::unavailable, [&] { (void)Client::open("etcd://" + one, options); });
  EXPECT_LT(took, options.op_timeout + kPrompt);
  took = fails_with(Errc::unavailable,
                    [&] { (void)Client::open("etcd://" + one + "," + two, options); });
  EXPECT_LT(took, 2 * options.op_timeout + kPrompt);
}

TEST(EtcdFailure, AuthClusterTakesTheRightCredentialsOnly) {
  EtcdCluster cluster(EtcdOptions{1, "pa:ss@w/rd"});
  const std::string at = "@" + cluster.endpoint(0);
  {
    Client client = Client::open(cluster.uri(), quick_options());
    Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    EXPECT_TRUE(client.check(lease.sequencer()));
    EXPECT_FALSE(
        Client::open(cluster.uri()).lock("g", "x").acquire(Mode::exclusive, Wait::none()));
    lease.release();
  }
  for (const std::string& bad :
       {"etcd://root:wrong" + at, "etcd://mallory:wrong" + at, cluster.bare_uri()}) {
    fails_with(Errc::permission_denied, [&] { (void)Client::open(bad, quick_options()); });
  }
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdFailure, DeadFirstEndpointIsSkippedAtOpen) {
  EtcdCluster cluster;
  const std::string dead = "127.0.0.1:" + std::to_string(free_port());
  const ClientOptions options = quick_options(1000ms);
  const auto started = Clock::now();
  Client client = Client::open("etcd://" + dead + "," + cluster.endpoint(0), options);
  EXPECT_LT(Clock::now() - started, options.op_timeout + kPrompt);
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_TRUE(client.check(lease.sequencer()));
  EXPECT_EQ(requests(cluster, "g", "x"), 1u);
  lease.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdFailure, WaiterWhoseMemberIsKilledIsStillGranted) {
  EtcdCluster cluster(EtcdOptions{3, {}});
  const ClientOptions options = with_ttl(3s, 1000ms);
  // The holder talks to member 1, the waiter to member 0, which goes away.
  Client holder = Client::open(uri_starting_at(cluster, 1), options);
  Client waiter = Client::open(uri_starting_at(cluster, 0), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = acquire_queued(waiter, cluster, "x", Mode::exclusive, Wait::up_to(30s));
  ASSERT_EQ(requests(cluster, "g", "x"), 2u) << "the waiter did not queue";
  std::this_thread::sleep_for(300ms);  // watching

  cluster.kill9(0);
  (void)cluster.leader();  // a new one, if member 0 led
  std::this_thread::sleep_for(1s);
  ASSERT_EQ(waiting.wait_for(0s), std::future_status::timeout)
      << "the waiter ended when its member died";
  EXPECT_FALSE(held.lost());
  EXPECT_EQ(requests(cluster, "g", "x"), 2u) << "the waiter's request is gone";

  const std::uint64_t token = held.token();
  held.release();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready)
      << "the waiter was not granted after the holder released";
  Lease next = waiting.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  EXPECT_TRUE(holder.check(next.sequencer()));
  next.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdFailure, CallWhoseConnectionBreaksIsAskedAgainWhenTheMemberIsBack) {
  // The only member freezes while a call is on its way, then dies and comes back: the
  // connection under the call breaks ("Socket closed"). The call is asked again on a new
  // connection, within op_timeout, instead of failing with unavailable.
  EtcdCluster cluster(EtcdOptions{1, {}});
  Client client = Client::open(cluster.uri(), with_ttl(10s, 30s));
  client.lock("g", "warm").acquire(Mode::exclusive, Wait::none()).release();  // a session

  cluster.pause(0);
  auto attempt = std::async(std::launch::async, [&] {
    // Waiting: a session that may have lapsed meanwhile is replaced within the wait.
    return client.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(20s));
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(attempt.wait_for(0s), std::future_status::timeout)
      << "the call did not reach the frozen member";
  cluster.kill9(0);
  cluster.start(0);

  ASSERT_EQ(attempt.wait_for(30s), std::future_status::ready) << "the call hangs";
  Lease lease = attempt.get();  // unavailable, if the broken call was given up
  ASSERT_TRUE(lease) << "nobody else holds x";
  EXPECT_EQ(lock_keys(cluster, "g", "x").size(), 1u) << "the call asked twice left two keys";
  lease.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

}  // namespace
}  // namespace warden::testing
