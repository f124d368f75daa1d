// etcd:// when a Client's session lease disappears behind its back (an operator
// revoked it): every grant attached to it is lost at the next keep-alive round, long
// before its TTL, the lock goes to the next in line, and the Client carries on with a
// new session.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/semaphore.h"

namespace warden::testing {
namespace {

TEST(EtcdSession, RevokedSessionLosesEveryLeaseOnItAndTheClientStartsANewOne) {
  EtcdCluster cluster;
  // Keep-alive rounds every TTL/3 = 3 s; the TTL itself is far off.
  const ClientOptions options = with_ttl(9s);
  Client holder = Client::open(cluster.uri(), options);
  Client waiter = Client::open(cluster.uri(), options);

  Lease x = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(x);
  Lease y = holder.lock("g", "y").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(y);
  std::atomic<int> callbacks{0};
  x.on_lost([&] { ++callbacks; });
  y.on_lost([&] { ++callbacks; });
  const std::string session = lease_of_lock(cluster, "y");
  ASSERT_FALSE(session.empty()) << "no lease on y's key";
  EXPECT_EQ(lease_of_lock(cluster, "x"), session)
      << "two grants of one Client with one TTL are on different sessions";
  auto waiting = acquire_queued(waiter, cluster, "x", Mode::exclusive, Wait::up_to(30s));
  ASSERT_EQ(requests(cluster, "g", "x"), 2u) << "the waiter did not queue";

  cluster.etcdctl({"lease", "revoke", session});
  const auto revoked = Clock::now();

  // The waiter's watch sees the key go at once.
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready) << "the waiter was not granted";
  Lease next = waiting.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), x.token());

  const auto bound = options.lock_defaults.ttl / 3 + 2s;
  ASSERT_TRUE(eventually([&] { return x.lost() && y.lost(); }, bound))
      << "x lost: " << x.lost() << ", y lost: " << y.lost() << " " << seconds(bound)
      << " s after the session was revoked";
  EXPECT_LT(Clock::now() - revoked, options.lock_defaults.ttl / 2)
      << "the loss was only noticed near the TTL";
  EXPECT_TRUE(eventually([&] { return callbacks == 2; }, kPrompt)) << "on_lost did not run";
  EXPECT_FALSE(holder.check(x.sequencer()));
  EXPECT_NO_THROW(x.release());
  EXPECT_NO_THROW(y.release());

  // The same Client works on, on a new session.
  Lease z = holder.lock("g", "z").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(z) << "no grant after the session was lost";
  const std::string new_session = lease_of_lock(cluster, "z");
  EXPECT_FALSE(new_session.empty());
  EXPECT_NE(new_session, session) << "the new grant is on the revoked lease";
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(z.lost());
  EXPECT_TRUE(holder.check(z.sequencer()));

  const std::uint64_t next_token = next.token();
  next.release();
  Lease again = holder.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(5s));
  ASSERT_TRUE(again);
  EXPECT_GT(again.token(), next_token);
  again.release();
  z.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdSession, AcquireRightAfterTheSessionWasRevokedGetsANewSession) {
  EtcdCluster cluster;
  // The keeper notices the revoke only at its next round, up to 10 s away.
  const ClientOptions options = with_ttl(30s);
  Client client = Client::open(cluster.uri(), options);
  Lease x = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(x);
  const std::string session = lease_of_lock(cluster, "x");
  ASSERT_FALSE(session.empty());
  cluster.etcdctl({"lease", "revoke", session});

  // Before the keeper has noticed: the request must not fail because its session is
  // gone, it belongs on a new one.
  Lease y;
  try {
    y = client.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(5s));
  } catch (const Error& e) {
    FAIL() << "acquire on a Client whose session was just revoked threw " << to_string(e.code())
           << ": " << e.what();
  }
  ASSERT_TRUE(y);
  EXPECT_NE(lease_of_lock(cluster, "y"), session);
  EXPECT_TRUE(client.check(y.sequencer()));
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(y.lost());
  y.release();
  EXPECT_NO_THROW(x.release());
}

// A semaphore's requests live on sessions like a lock's. A holder whose session is
// revoked loses its permits and the waiter behind gets them; a waiter whose session is
// revoked while it waits queues again on a new one and is granted once permits free.
TEST(EtcdSession, SemaphoreRequestsFollowTheirSessions) {
  EtcdCluster cluster;
  const ClientOptions options = with_ttl(9s);
  Client holder = Client::open(cluster.uri(), options);
  Client waiter = Client::open(cluster.uri(), options);
  Lease marker = holder.lock("g", "marker").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(marker);
  const std::string holder_session = lease_of_lock(cluster, "marker");
  ASSERT_FALSE(holder_session.empty());

  Lease both = holder.semaphore("g", "s", 2).acquire(2, Wait::none());
  ASSERT_TRUE(both);
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.semaphore("g", "s", 2).acquire(1, Wait::up_to(30s));
  });
  ASSERT_TRUE(eventually([&] { return requests(cluster, "g", "s") == 2; }));
  std::string waiter_session;
  for (const auto& key : lock_keys(cluster, "g", "s")) {
    if (const auto lease = lease_of(cluster, key); lease != holder_session) waiter_session = lease;
  }
  ASSERT_FALSE(waiter_session.empty());

  // The waiter's session goes: its request key with it. It must queue again.
  cluster.etcdctl({"lease", "revoke", waiter_session});
  ASSERT_TRUE(eventually([&] {
    const auto keys = lock_keys(cluster, "g", "s");
    return keys.size() == 2 && lease_of(cluster, keys[0]) != waiter_session &&
           lease_of(cluster, keys[1]) != waiter_session;
  })) << "the waiter did not queue again on a new session";
  EXPECT_EQ(waiting.wait_for(500ms), std::future_status::timeout) << "granted beyond 2 permits";

  // Now the holder's session goes: its permits with it, and the waiter gets one.
  cluster.etcdctl({"lease", "revoke", holder_session});
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready) << "the waiter was not granted";
  Lease one = waiting.get();
  ASSERT_TRUE(one);
  EXPECT_GT(one.token(), both.token());
  EXPECT_TRUE(eventually([&] { return both.lost(); }, options.lock_defaults.ttl / 3 + 2s));
  EXPECT_NO_THROW(both.release());
  EXPECT_NO_THROW(marker.release());
  one.release();
  EXPECT_TRUE(no_warden_keys(cluster)) << "left:" << describe(warden_keys(cluster));
}

}  // namespace
}  // namespace warden::testing
