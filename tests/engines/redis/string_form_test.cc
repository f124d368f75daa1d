// redis://'s string form (lua/lock_base.lua): an exclusive holder without a lock_delay,
// alone in its lock, is one string key "TOKEN OWNER" that expires with its lease; the
// first request that needs more (a waiter, a shared request) turns it into the hash it
// stands for. Read behind the engine's back with a probe.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/sequencer.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

std::string info_key(const std::string& name) { return lock_tag("g", name) + ":i"; }

std::string type_of(RedisProbe& probe, const std::string& name) {
  return probe.command({"TYPE", info_key(name)});
}

long long pttl_of(RedisProbe& probe, const std::string& name) {
  return std::stoll(probe.command({"PTTL", info_key(name)}));
}

bool starts_with_token(const std::string& value, const Lease& lease) {
  return value.rfind(std::to_string(lease.token()) + ' ', 0) == 0;
}

TEST(RedisStringForm, AnUncontendedExclusiveLockIsOneStringKeyThatExpiresWithItsLease) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  Lease lease = client.lock("g", "n", ttl(10s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_EQ(probe.warden_keys(), std::vector<std::string>{info_key("n")});
  EXPECT_EQ(type_of(probe, "n"), "string");
  const std::string value = probe.command({"GET", info_key("n")});
  EXPECT_TRUE(starts_with_token(value, lease)) << value;
  // Its expiry is the lease itself, not the lease plus a margin as in the hash.
  const long long pttl = pttl_of(probe, "n");
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 10'000);

  EXPECT_TRUE(client.check(lease.sequencer()));
  const LockStatus status = client.inspect("g", "n");
  ASSERT_EQ(status.holders.size(), 1u);
  EXPECT_EQ(status.holders[0].mode, Mode::exclusive);
  EXPECT_EQ(status.holders[0].token, lease.token());
  ASSERT_TRUE(status.holders[0].ttl_left);
  EXPECT_GT(status.holders[0].ttl_left->count(), 0);
  EXPECT_TRUE(status.waiters.empty());
  ASSERT_EQ(client.list("g").size(), 1u);

  lease.release();
  EXPECT_TRUE(probe.warden_keys().empty());
}

TEST(RedisStringForm, ALockDelayOrASharedRequestKeepsTheHash) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  LockOptions delayed = ttl(10s);
  delayed.lock_delay = 1s;
  Lease lease = client.lock("g", "delayed", delayed).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_EQ(type_of(probe, "delayed"), "hash");
  Lease reader = client.lock("g", "shared", ttl(10s)).acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(reader);
  EXPECT_EQ(type_of(probe, "shared"), "hash");
  lease.release();
  reader.release();
  EXPECT_TRUE(probe.warden_keys().empty());
}

TEST(RedisStringForm, AWaiterTurnsItIntoTheHashWithTheSameHolder) {
  RedisServer server;
  RedisProbe probe(server);
  Client holder = Client::open(server.uri());
  Client waiter = Client::open(server.uri());
  Lease held = holder.lock("g", "n", ttl(10s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  ASSERT_EQ(type_of(probe, "n"), "string");
  // A request that will not wait is refused and leaves the form alone.
  EXPECT_FALSE(waiter.lock("g", "n").acquire(Mode::exclusive, Wait::none()));
  EXPECT_FALSE(waiter.lock("g", "n").acquire(Mode::shared, Wait::none()));
  EXPECT_EQ(type_of(probe, "n"), "string");

  auto waiting = acquire_queued(waiter, probe, "n", Mode::exclusive, Wait::forever());
  ASSERT_EQ(queued(probe, "g", "n"), 1);
  EXPECT_EQ(type_of(probe, "n"), "hash");
  const std::string record = probe.command({"HGET", info_key("n"), "x"});
  EXPECT_TRUE(starts_with_token(record, held)) << record;
  EXPECT_EQ(probe.command({"HGET", info_key("n"), "last"}), std::to_string(held.token()));
  // The hash keeps the key at least as long as the string would have lived.
  EXPECT_GT(pttl_of(probe, "n"), 9'000);

  // The holder is the same holder: checked, shown, and released as before.
  EXPECT_TRUE(holder.check(held.sequencer()));
  const LockStatus status = holder.inspect("g", "n");
  ASSERT_EQ(status.holders.size(), 1u);
  EXPECT_EQ(status.holders[0].token, held.token());
  EXPECT_EQ(status.waiters.size(), 1u);
  const std::uint64_t first = held.token();
  held.release();

  ASSERT_EQ(waiting.wait_for(kNoHang), std::future_status::ready);
  Lease next = waiting.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), first);
  EXPECT_FALSE(holder.check(Sequencer{"g", "n", Mode::exclusive, first}));
  next.release();
  EXPECT_TRUE(probe.warden_keys().empty());
}

TEST(RedisStringForm, RenewalsMoveItsExpiryAndAnUnrenewedOneIsGoneWithItsLease) {
  RedisServer server;
  RedisProbe probe(server);
  Client renewing = Client::open(server.uri());
  Lease kept = renewing.lock("g", "kept", ttl(400ms)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(kept);

  ClientOptions no_watchdog;
  no_watchdog.watchdog = false;
  Client lapsing = Client::open(server.uri(), no_watchdog);
  Lease lapsed = lapsing.lock("g", "lapsed", ttl(400ms)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lapsed);
  const Sequencer old = lapsed.sequencer();

  // Past two of its TTLs, the renewed one is still the string, and still held.
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(type_of(probe, "kept"), "string");
  EXPECT_GT(pttl_of(probe, "kept"), 0);
  EXPECT_FALSE(kept.lost());
  EXPECT_TRUE(renewing.check(kept.sequencer()));

  // The other one's key went when its lease ran out, and with it the grant.
  EXPECT_EQ(probe.command({"EXISTS", info_key("lapsed")}), "0");
  EXPECT_FALSE(lapsing.check(old));
  Client other = Client::open(server.uri());
  Lease taken = other.lock("g", "lapsed", ttl(10s)).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(taken);
  EXPECT_GT(taken.token(), old.token);
  // The late release of the lapsed grant leaves the new holder's key alone.
  lapsed.release();
  EXPECT_TRUE(starts_with_token(probe.command({"GET", info_key("lapsed")}), taken));
  EXPECT_TRUE(other.check(taken.sequencer()));
  // A shared sequencer with the exclusive holder's token names no grant.
  EXPECT_FALSE(other.check(Sequencer{"g", "lapsed", Mode::shared, taken.token()}));
  taken.release();
  kept.release();
  EXPECT_TRUE(probe.warden_keys().empty());
}

}  // namespace
}  // namespace warden::testing
