// Lock caching on redis:// (LockOptions::cache, docs/contract.md "Lock caching"): a
// released lock stays granted on Redis and is kept by its client until another client
// asks for it. Redis cannot push a revoke, so a request refused while a caching holder
// holds publishes '?' on the lock's channel, and the holder's client, which watches for
// it, gives the lock back (lua/lock_base.lua, caches; core/watch_revokes.h). Against a
// real redis-server; what Redis holds and publishes is read behind the clients' back.
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compose/engine_registry.h"
#include "core/uri.h"
#include "engines/redis/test_util.h"
#include "support/caching_child.h"
#include "support/info_fields.h"
#include "torture/partition_proxy.h"

namespace warden::testing {
namespace {

LockOptions cached(std::chrono::milliseconds ttl_ms = 30s) {
  LockOptions options = ttl(ttl_ms);
  options.cache = true;
  return options;
}

ClientOptions caching_client() {
  ClientOptions options = quick_options(2000ms);
  options.cache_idle = std::chrono::hours(1);  // only a revoke gives a lock back in time
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

// FIELD of Redis' INFO SECTION as a number (0 if absent).
std::uint64_t info_number(RedisProbe& probe, const std::string& section, const std::string& field) {
  const auto fields = info_fields(probe.command({"INFO", section}));
  const auto it = fields.find(field);
  return it == fields.end() ? 0 : std::stoull(it->second);
}

// How many SPUBLISH calls Redis has run since it started, scripts' included.
std::uint64_t publishes(RedisProbe& probe) {
  // "cmdstat_spublish:calls=N,usec=…"
  const auto fields = info_fields(probe.command({"INFO", "commandstats"}));
  const auto it = fields.find("cmdstat_spublish");
  if (it == fields.end()) return 0;
  return std::stoull(it->second.substr(it->second.find('=') + 1));
}

// Whether the lock's :i holds the string form's "TOKEN OWNER" (lua/lock_base.lua).
bool in_string_form(RedisProbe& probe, const std::string& name) {
  return probe.command({"TYPE", lock_tag("g", name) + ":i"}) == "string";
}

TEST(RedisCache, AReleasedLockStaysGrantedOnRedisMarkedAsCached) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri(), caching_client());
  ASSERT_TRUE(client.capabilities().cache);
  Lock lock = client.lock("g", "x", cached());
  std::uint64_t token = 0;
  {
    Lease lease = lock.acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    token = lease.token();
  }
  // Still the client's grant on Redis, in the cheap string form.
  EXPECT_TRUE(in_string_form(probe, "x"));
  const std::string held = probe.command({"GET", lock_tag("g", "x") + ":i"});
  EXPECT_EQ(held.substr(0, held.find(' ')), std::to_string(token));
  EXPECT_EQ(held.back(), '*') << "a grant its client caches is marked: " << held;
  Lease again = lock.acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(again);
  EXPECT_EQ(again.token(), token);
  EXPECT_EQ(counter(client, "warden_cache_hits_total"), 1u);
  EXPECT_EQ(probe.command({"GET", lock_tag("g", "x") + ":i"}), held);
}

// a caches ("g", "x") with `options`, in the string form or not as `string_form` says;
// b's first try fails, and asks for the lock back, so one of b's next tries succeeds.
void expect_a_try_to_ask_the_lock_back(const LockOptions& options, bool string_form) {
  RedisServer server;
  RedisProbe probe(server);
  Client a = Client::open(server.uri(), caching_client());
  Client b = Client::open(server.uri(), quick_options());
  { Lease lease = a.lock("g", "x", options).acquire(Mode::exclusive, Wait::none()); }
  ASSERT_EQ(in_string_form(probe, "x"), string_form);
  Lease first = b.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_FALSE(first) << "the cached lock is still a's when b first tries";
  EXPECT_TRUE(eventually([&] {
    Lease lease = b.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    return static_cast<bool>(lease);
  }));
  EXPECT_EQ(counter(a, "warden_cache_revokes_total"), 1u);
}

// The string form's refusal of a try (no queue to join) publishes the '?'.
TEST(RedisCache, ATryByAnotherClientAsksForTheLockBack) {
  expect_a_try_to_ask_the_lock_back(cached(), /*string_form=*/true);
}

// With a lock_delay the holder lives in the hash form, where the refusal is the shared
// part's (lua/lock.lua, ask_cached_back).
TEST(RedisCache, ATryAsksForALockWithALockDelayBackToo) {
  LockOptions delayed = cached();
  delayed.lock_delay = 100ms;
  expect_a_try_to_ask_the_lock_back(delayed, /*string_form=*/false);
}

TEST(RedisCache, ARevokeWhileAThreadHoldsTheLockIsServedAfterThatThreadUnlocks) {
  RedisServer server;
  RedisProbe probe(server);
  Client a = Client::open(server.uri(), caching_client());
  Client b = Client::open(server.uri(), quick_options());
  Lock mine = a.lock("g", "x", cached());
  { Lease warm = mine.acquire(Mode::exclusive, Wait::none()); }  // now cached
  Lease held = mine.acquire(Mode::exclusive, Wait::none());      // a hit, held by this thread
  ASSERT_TRUE(held);
  const std::uint64_t token = held.token();

  auto waiter = acquire_queued(b, probe, "x", Mode::exclusive, Wait::up_to(20s));
  ASSERT_EQ(queued(probe, "g", "x"), 1);
  ASSERT_TRUE(eventually([&] { return counter(a, "warden_cache_revokes_total") == 1; }));
  // The revoke does not take the lock from the thread that holds it.
  EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout);
  EXPECT_TRUE(a.check(held.sequencer()));

  held = Lease();  // the unlock gives it back instead of caching it
  Lease theirs = waiter.get();
  ASSERT_TRUE(theirs);
  EXPECT_GT(theirs.token(), token);
  EXPECT_EQ(counter(a, "warden_cache_give_backs_total"), 1u);
}

// A shared holder's mark is read from its t:TOKEN field: an exclusive waiter asks the
// cached shared grant back.
TEST(RedisCache, AnExclusiveWaiterAsksACachedSharedGrantBack) {
  RedisServer server;
  RedisProbe probe(server);
  Client a = Client::open(server.uri(), caching_client());
  Client b = Client::open(server.uri(), quick_options());
  { Lease lease = a.lock("g", "x", cached()).acquire(Mode::shared, Wait::none()); }
  Lease theirs = b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(20s));
  ASSERT_TRUE(theirs) << "the cached shared grant was not given back";
  EXPECT_EQ(counter(a, "warden_cache_revokes_total"), 1u);
}

// Holders that do not cache are never told anything: a refused or queued request
// publishes nothing for them, so waiting costs what it did before caching existed.
TEST(RedisCache, ARefusedRequestPublishesNothingWhenNoHolderCaches) {
  RedisServer server;
  RedisProbe probe(server);
  Client a = Client::open(server.uri(), quick_options());
  Client b = Client::open(server.uri(), quick_options());
  Lease exclusive = a.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  Lease shared = a.lock("g", "s").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(exclusive && shared);
  const std::uint64_t before = publishes(probe);
  EXPECT_FALSE(b.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_FALSE(b.lock("g", "s").acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_FALSE(b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_EQ(publishes(probe), before);

  // The same refusal with a caching holder publishes (the counter is not dead).
  Client c = Client::open(server.uri(), caching_client());
  { Lease lease = c.lock("g", "c", cached()).acquire(Mode::exclusive, Wait::none()); }
  EXPECT_FALSE(b.lock("g", "c").acquire(Mode::exclusive, Wait::none()));
  EXPECT_GT(publishes(probe), before);
}

// The holder caches the lock and dies: nobody answers the '?', so the lease settles it.
TEST(RedisCache, ARevokeToADeadClientIsSettledByTheLease) {
  RedisServer server;
  RedisProbe probe(server);
  const pid_t child = fork_caching_holder(server.uri(), "g", "x", 1000ms);
  ASSERT_GT(child, 0) << "the child did not cache the lock";
  ASSERT_TRUE(in_string_form(probe, "x")) << "cached: still granted on Redis";
  kill_and_reap(child);

  Client waiter = Client::open(server.uri(), quick_options());
  Lease lease = waiter.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s));
  EXPECT_TRUE(lease) << "the dead client's cached lease never ended";
}

// Redis refuses every new connection (maxclients), so the caching client's subscriber,
// which opens with its first watch, never subscribes and no '?' reaches it: its watch
// looks at the lock every second instead, and a waiter is still let in.
TEST(RedisCache, AHolderWhoseSubscriberCannotConnectStillGivesTheLockBack) {
  RedisServer server;
  RedisProbe probe(server);
  const std::string uri = uri_with(server, "pool=1");
  Client a = Client::open(uri, caching_client());  // its one pipeline connects at open
  Client b = Client::open(uri, quick_options());
  const std::uint64_t connected = info_number(probe, "clients", "connected_clients");
  ASSERT_EQ(probe.command({"CONFIG", "SET", "maxclients", std::to_string(connected)}), "OK");

  { Lease lease = a.lock("g", "x", cached()).acquire(Mode::exclusive, Wait::none()); }
  // The watch's first look (right after its subscriber's first try) finds nobody yet:
  // b comes later, so only a later look can see it.
  ASSERT_TRUE(eventually([&] { return info_number(probe, "stats", "rejected_connections") > 0; }))
      << "a's subscriber never tried to connect";
  std::this_thread::sleep_for(200ms);
  Lease theirs = b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(20s));
  EXPECT_TRUE(theirs) << "the cached lock was not given back";
  EXPECT_EQ(counter(a, "warden_cache_revokes_total"), 1u);
  EXPECT_EQ(subscribers(probe, "g", "x"), 0) << "a subscriber got in after all";
}

// A cacheable grant lost while a thread holds it (its keys deleted behind the client's
// back): released, it has nothing to give back, and its revoke watch ends with it. A
// watch left behind would keep its thread and its subscription for the Client's life.
TEST(RedisCache, AGrantLostWhileHeldEndsItsRevokeWatchWhenReleased) {
  RedisServer server;
  RedisProbe probe(server);
  Client a = Client::open(server.uri(), caching_client());
  Lease lease = a.lock("g", "x", cached(1500ms)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  ASSERT_TRUE(eventually([&] { return subscribers(probe, "g", "x") == 1; }))
      << "the revoke watch never subscribed";
  const std::string tag = lock_tag("g", "x");
  probe.command({"DEL", tag + ":h", tag + ":i", tag + ":q", tag + ":w", tag + ":p"});
  ASSERT_TRUE(eventually([&] { return lease.lost(); }, 5s)) << "the loss was not noticed";
  lease = Lease();  // nothing to release: the grant is gone
  EXPECT_TRUE(eventually([&] { return subscribers(probe, "g", "x") == 0; }, 5s))
      << "the revoke watch of the lost grant lives on";
}

// The subscriber's connection dropped silently (a NAT or firewall forgot it: no FIN, no
// RST, nothing gets through): its PING goes unanswered, the connection counts as broken,
// the revoke watch looks at the lock instead of waiting to hear '?', and the cached lock
// is given back, instead of being kept for cache_idle while another client waits.
TEST(RedisCache, ACachedLockIsGivenBackWhenTheSubscriberGoesSilent) {
  RedisServer server;
  RedisProbe probe(server);
  std::vector<std::unique_ptr<torture::PartitionProxy>> relays;
  Client a = Client::open(torture::proxied_url(server.uri(), relays), caching_client());
  Client b = Client::open(server.uri(), quick_options());
  { Lease lease = a.lock("g", "x", cached()).acquire(Mode::exclusive, Wait::none()); }
  ASSERT_TRUE(eventually([&] { return subscribers(probe, "g", "x") == 1; }))
      << "a's revoke watch never subscribed";

  relays.front()->silence_connections();  // a's subscriber and pooled connections alike
  // cache_idle is an hour and the lease 30 s: only the give-back frees it within the wait.
  Lease theirs = b.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(20s));
  EXPECT_TRUE(theirs) << "the cached lock was kept although its subscriber was silent";
}

// The revoke watch itself (RedisEngine::watch_requests). A '?' published before its
// subscription took effect is not heard, so when the subscription is confirmed the watch
// looks at the lock: a waiter already queued is a request, a lock nobody waits for is
// not.
TEST(RedisCache, TheRevokeWatchLooksWhenItsSubscriptionIsConfirmed) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri(), quick_options());
  Client b = Client::open(server.uri(), quick_options());
  Lease x = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  Lease y = holder.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(x && y);
  auto waiter = acquire_queued(b, probe, "x", Mode::exclusive, Wait::up_to(20s));
  ASSERT_EQ(queued(probe, "g", "x"), 1);

  std::unique_ptr<core::Engine> engine =
      compose::open_engine(core::Uri::parse(server.uri()), quick_options());
  auto asked = engine->watch_requests(core::LockKey{"g", "x"});
  auto unasked = engine->watch_requests(core::LockKey{"g", "y"});
  ASSERT_TRUE(asked && unasked);
  EXPECT_TRUE(asked->wait(Clock::now() + kNoHang, {})) << "the queued waiter was not seen";
  EXPECT_FALSE(unasked->wait(Clock::now() + 1s, {})) << "nobody asks for y";
  EXPECT_FALSE(unasked->broken());

  // A '?' after the watch began is heard as such (b's try, refused by a caching holder).
  Client c = Client::open(server.uri(), caching_client());
  { Lease lease = c.lock("g", "z", cached()).acquire(Mode::exclusive, Wait::none()); }
  auto on_z = engine->watch_requests(core::LockKey{"g", "z"});
  ASSERT_TRUE(eventually([&] { return subscribers(probe, "g", "z") == 2; }));
  EXPECT_FALSE(on_z->wait(Clock::now() + 200ms, {})) << "the confirmation found nobody";
  EXPECT_FALSE(b.lock("g", "z").acquire(Mode::exclusive, Wait::none()));
  EXPECT_TRUE(on_z->wait(Clock::now() + kNoHang, {})) << "the '?' was not heard";

  x.release();
  EXPECT_TRUE(waiter.get());
}

}  // namespace
}  // namespace warden::testing
