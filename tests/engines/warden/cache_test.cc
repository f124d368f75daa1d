// Lock caching on warden:// (LockOptions::cache, docs/contract.md "Lock caching"): a
// released lock stays granted on wardend and is kept by its client until another client
// asks for it, it stays unused for cache_idle, the cache is full, or the client closes.
// Against a real wardend; what the server holds is read behind the clients' back.
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/caching_child.h"
#include "support/server_process.h"
#include "support/waiting.h"
#include "support/wardend_probe.h"
#include "torture/partition_proxy.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/multi_lock.h"

namespace warden::testing {
namespace {

LockOptions cached(std::chrono::milliseconds ttl = 30s) {
  LockOptions options;
  options.ttl = ttl;
  options.cache = true;
  return options;
}

ClientOptions caching_client(std::chrono::milliseconds idle = std::chrono::hours(1),
                             std::size_t capacity = 1024) {
  ClientOptions options = quick_options(2000ms);
  options.cache_idle = idle;
  options.cache_capacity = capacity;
  return options;
}

// A counter of the client's metrics for group "g" (0 if absent).
std::uint64_t counter(const Client& client, const std::string& name) {
  const std::string text = client.metrics_text();
  const std::string prefix = name + "{group=\"g\"} ";
  const auto at = text.find(prefix);
  if (at == std::string::npos) return 0;
  return std::stoull(text.substr(at + prefix.size()));
}

std::vector<std::uint64_t> holders(const Wardend& server, const std::string& key) {
  return WardendProbe(server.port()).inspect(key).holder_tokens;
}

TEST(WardenCache, ARepeatedAcquireIsServedFromTheCacheWithTheSameToken) {
  Wardend server;
  Client client = Client::open(server.uri(), caching_client());
  ASSERT_TRUE(client.capabilities().cache);
  Lock lock = client.lock("g", "hot", cached());
  std::uint64_t first = 0;
  for (int i = 0; i < 20; ++i) {
    Lease lease = lock.acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease) << "cycle " << i;
    if (i == 0) first = lease.token();
    EXPECT_EQ(lease.token(), first) << "a cached grant is the same backend grant";
    EXPECT_TRUE(client.check(lease.sequencer()));
  }
  EXPECT_EQ(counter(client, "warden_cache_hits_total"), 19u);
  EXPECT_EQ(counter(client, "warden_acquire_attempts_total"), 1u) << "only the first cycle asked";
  // Released by the client, the lock stays granted on the server.
  EXPECT_EQ(holders(server, "g/hot"), std::vector<std::uint64_t>{first});
}

// The revoke listener's connection dropped silently (a NAT or firewall forgot it: no FIN,
// no RST, nothing gets through): the listener's PING goes unanswered, the channel counts
// as broken, and the cached lock is given back, instead of being kept for cache_idle
// while another client waits for it.
TEST(WardenCache, ACachedLockIsGivenBackWhenTheRevokeChannelGoesSilent) {
  Wardend server;
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  Client a = Client::open(torture::proxied_url(server.uri(), relays), caching_client());
  Client b = Client::open(server.uri(), quick_options());
  { Lease lease = a.lock("g", "x", cached()).acquire(Mode::exclusive, Wait::none()); }
  ASSERT_EQ(holders(server, "g/x").size(), 1u) << "cached, still granted";

  relays.front()->silence_connections();  // a's listener and pooled connections alike
  // cache_idle is an hour and the lease 30 s: only a give-back on the broken channel frees
  // it within the wait (detection takes a PING interval and op_timeout, the give-back
  // another op_timeout on a silent pooled connection, then one on a new one).
  Lease theirs = b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(20s));
  EXPECT_TRUE(theirs) << "the cached lock was kept although its revoke channel was silent";
}

TEST(WardenCache, AnotherClientsWaitRevokesAnIdleCachedLock) {
  Wardend server;
  Client a = Client::open(server.uri(), caching_client());
  Client b = Client::open(server.uri(), quick_options());
  std::uint64_t cached_token = 0;
  {
    Lease lease = a.lock("g", "x", cached()).acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    cached_token = lease.token();
  }
  ASSERT_EQ(holders(server, "g/x").size(), 1u) << "cached, still granted";

  // cache_idle is an hour: only the revoke can free the lock within the wait.
  Lease theirs = b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s));
  ASSERT_TRUE(theirs) << "the cached lock was not given back on request";
  EXPECT_GT(theirs.token(), cached_token);
  EXPECT_EQ(counter(a, "warden_cache_revokes_total"), 1u);
  EXPECT_EQ(counter(a, "warden_cache_give_backs_total"), 1u);

  // a's next acquire is no cache hit: it queues behind b like anyone.
  auto again = std::async(std::launch::async, [&] {
    return a.lock("g", "x", cached()).acquire(Mode::exclusive, Wait::up_to(10s)).token();
  });
  ASSERT_TRUE(eventually([&] { return WardendProbe(server.port()).inspect("g/x").waiters == 1; }));
  const std::uint64_t b_token = theirs.token();
  theirs.release();
  EXPECT_GT(again.get(), b_token);
  EXPECT_EQ(counter(a, "warden_cache_hits_total"), 0u);
}

TEST(WardenCache, ARevokeWhileAThreadHoldsTheLockIsServedAfterThatThreadUnlocks) {
  Wardend server;
  Client a = Client::open(server.uri(), caching_client());
  Client b = Client::open(server.uri(), quick_options());
  Lock mine = a.lock("g", "x", cached());
  { Lease warm = mine.acquire(Mode::exclusive, Wait::none()); }  // now cached
  Lease held = mine.acquire(Mode::exclusive, Wait::none());      // a hit, held by this thread
  ASSERT_TRUE(held);
  const std::uint64_t token = held.token();

  auto waiter = std::async(std::launch::async, [&] {
    return b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s)).token();
  });
  ASSERT_TRUE(eventually([&] { return WardendProbe(server.port()).inspect("g/x").waiters == 1; }));
  ASSERT_TRUE(eventually([&] { return counter(a, "warden_cache_revokes_total") == 1; }));
  // The revoke does not take the lock from the thread that holds it.
  EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout);
  EXPECT_TRUE(a.check(held.sequencer()));

  held = Lease();  // the unlock gives it back instead of caching it
  EXPECT_GT(waiter.get(), token);
  EXPECT_EQ(counter(a, "warden_cache_give_backs_total"), 1u);
}

TEST(WardenCache, ATryByAnotherClientAsksForTheLockBack) {
  Wardend server;
  Client a = Client::open(server.uri(), caching_client());
  Client b = Client::open(server.uri(), quick_options());
  { Lease lease = a.lock("g", "x", cached()).acquire(Mode::exclusive, Wait::none()); }
  // The first try may find the lock cached; it asks for it back, so a try soon succeeds.
  EXPECT_TRUE(eventually([&] {
    Lease lease = b.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    return static_cast<bool>(lease);
  }));
}

TEST(WardenCache, AnIdleCachedLockIsGivenBackAfterCacheIdle) {
  Wardend server;
  Client client = Client::open(server.uri(), caching_client(300ms));
  { Lease lease = client.lock("g", "x", cached()).acquire(Mode::exclusive, Wait::none()); }
  EXPECT_TRUE(eventually([&] { return holders(server, "g/x").empty(); }));
  EXPECT_EQ(counter(client, "warden_cache_give_backs_total"), 1u);
}

TEST(WardenCache, ACachedLockIsRenewedLikeAHeldOne) {
  Wardend server;
  Client client = Client::open(server.uri(), caching_client());
  std::uint64_t token = 0;
  {
    Lease lease = client.lock("g", "x", cached(300ms)).acquire(Mode::exclusive, Wait::none());
    token = lease.token();
  }
  std::this_thread::sleep_for(900ms);  // three leases long: only renewals keep it
  EXPECT_EQ(holders(server, "g/x"), std::vector<std::uint64_t>{token});
  Lease again = client.lock("g", "x", cached(300ms)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(again);
  EXPECT_EQ(again.token(), token);
}

TEST(WardenCache, ClosingTheClientGivesBackItsCachedLocks) {
  Wardend server;
  {
    Client client = Client::open(server.uri(), caching_client());
    for (const char* name : {"x", "y", "z"}) {
      Lease lease = client.lock("g", name, cached()).acquire(Mode::exclusive, Wait::none());
      ASSERT_TRUE(lease);
    }
    ASSERT_EQ(holders(server, "g/y").size(), 1u);
  }
  // The client's close answered its releases before it returned.
  for (const char* name : {"g/x", "g/y", "g/z"}) EXPECT_TRUE(holders(server, name).empty()) << name;
}

TEST(WardenCache, TheCacheKeepsAtMostItsCapacityAndGivesBackTheLongestUnused) {
  Wardend server;
  Client client = Client::open(server.uri(), caching_client(std::chrono::hours(1), 2));
  for (const char* name : {"a", "b", "c"}) {
    Lease lease = client.lock("g", name, cached()).acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
  }
  EXPECT_TRUE(eventually([&] { return holders(server, "g/a").empty(); })) << "the oldest stays";
  EXPECT_EQ(holders(server, "g/b").size(), 1u);
  EXPECT_EQ(holders(server, "g/c").size(), 1u);
}

TEST(WardenCache, ACachedSharedGrantDoesNotServeAnExclusiveRequest) {
  Wardend server;
  Client client = Client::open(server.uri(), caching_client());
  Lock lock = client.lock("g", "x", cached());
  std::uint64_t shared_token = 0;
  {
    Lease lease = lock.acquire(Mode::shared, Wait::none());
    shared_token = lease.token();
  }
  Lease exclusive = lock.acquire(Mode::exclusive, Wait::up_to(10s));
  ASSERT_TRUE(exclusive);
  EXPECT_GT(exclusive.token(), shared_token) << "a fresh exclusive grant";
  EXPECT_EQ(holders(server, "g/x"), std::vector<std::uint64_t>{exclusive.token()});
}

// The holder caches the lock and dies: nobody answers the revoke, so the lease settles it.
TEST(WardenCache, ARevokeToADeadClientIsSettledByTheLease) {
  Wardend server;
  const pid_t child = fork_caching_holder(server.uri(), "g", "x", 1000ms);
  ASSERT_GT(child, 0) << "the child did not cache the lock";
  ASSERT_EQ(holders(server, "g/x").size(), 1u);
  kill_and_reap(child);

  Client waiter = Client::open(server.uri(), quick_options());
  Lease lease = waiter.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s));
  EXPECT_TRUE(lease) << "the dead client's cached lease never ended";
}

TEST(WardenCache, AfterTheServerRestartsTheCachedLocksAreAskedForAfresh) {
  Wardend server;
  Client client = Client::open(server.uri(), caching_client());
  Lock lock = client.lock("g", "x", cached(300ms));
  { Lease lease = lock.acquire(Mode::exclusive, Wait::none()); }
  ASSERT_EQ(counter(client, "warden_cache_give_backs_total"), 0u);
  server.process().kill9();
  // The revoke channel broke: whatever it may have missed, every cached lock goes back.
  EXPECT_TRUE(eventually([&] { return counter(client, "warden_cache_give_backs_total") == 1; }));
  server.start();
  // The client's connector backs off after the failed connects (unavailable at once),
  // and the server's restart embargo holds grants back: both pass.
  Lease lease;
  EXPECT_TRUE(eventually(
      [&] {
        try {
          lease = lock.acquire(Mode::exclusive, Wait::up_to(10s));
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
        }
        return static_cast<bool>(lease);
      },
      20s));
  EXPECT_EQ(counter(client, "warden_cache_hits_total"), 0u);
}

TEST(WardenCache, OnlyLocksAreCached) {
  Wardend server;
  Client client = Client::open(server.uri(), caching_client());
  const auto refused = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.code() == Errc::invalid_argument;
    }
    return false;
  };
  EXPECT_TRUE(refused([&] { (void)client.semaphore("g", "s", 3, cached()); }));
  EXPECT_TRUE(refused([&] { (void)client.election("g", "e", cached()); }));
  EXPECT_TRUE(refused([&] {
    (void)client.multi({LockSpec{"g", "a", Mode::exclusive}, LockSpec{"g", "b", Mode::exclusive}},
                       cached());
  }));
  // Caching as the client's default leaves the primitives that are never cached alone.
  ClientOptions defaults = caching_client();
  defaults.lock_defaults.cache = true;
  Client by_default = Client::open(server.uri(), defaults);
  EXPECT_NO_THROW((void)by_default.semaphore("g", "s", 3));
  EXPECT_NO_THROW((void)by_default.election("g", "e"));
}

}  // namespace
}  // namespace warden::testing
