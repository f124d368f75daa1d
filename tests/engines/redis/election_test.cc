// redis:// elections behind the engine's back: a campaign's value is the field "v" of
// the lock's hash :i (docs/engines/redis.md), written with the grant and gone with it;
// proclaim.lua rewrites it only while the grant is held. Read with redis-cli (what an
// operator would run) and with a direct hiredis probe for bytes a shell cannot carry.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/engine.h"
#include "engines/redis/redis_engine.h"
#include "support/observed_leaders.h"
#include "support/redis_cluster.h"
#include "test_util.h"
#include "warden/election.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

std::string info_key(const std::string& name) { return lock_tag("g", name) + ":i"; }

// `redis-cli -p PORT ARGS...`, its output without the trailing newline. Arguments are
// plain words here (no shell quoting needed beyond the single quotes).
std::string redis_cli(const RedisServer& server, const std::vector<std::string>& args) {
  std::string command = redis_cli_path() + " -p " + std::to_string(server.port());
  for (const auto& a : args) command += " '" + a + "'";
  std::FILE* pipe = ::popen(("timeout 30 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  std::string out;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  ::pclose(pipe);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Lock options for a grant nobody renews before the test is done with it.
LockOptions long_lease() { return ttl(60s); }

TEST(RedisElection, TheValueIsFieldVOfTheLockHashAndAProclaimRewritesIt) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  Client other = Client::open(server.uri());
  Leadership leading = client.election("g", "e").campaign("node-a:8080", Wait::none());
  ASSERT_TRUE(leading);
  EXPECT_EQ(probe.warden_keys(), std::vector<std::string>{info_key("e")})
      << "a value takes no key of its own";
  EXPECT_EQ(redis_cli(server, {"TYPE", info_key("e")}), "hash");
  EXPECT_EQ(redis_cli(server, {"HGET", info_key("e"), "v"}), "node-a:8080");
  const std::string x = redis_cli(server, {"HGET", info_key("e"), "x"});
  EXPECT_EQ(x.rfind(std::to_string(leading.term()) + ' ', 0), 0u) << x;

  leading.proclaim("node-a:9090");
  EXPECT_EQ(redis_cli(server, {"HGET", info_key("e"), "v"}), "node-a:9090");
  EXPECT_EQ(other.election("g", "e").leader(), (Leader{"node-a:9090", leading.term()}));
  const std::string binary("\0\r\n \xff", 5);
  leading.proclaim(binary);
  EXPECT_EQ(probe.command({"HGET", info_key("e"), "v"}), binary);
  leading.proclaim("");
  EXPECT_EQ(redis_cli(server, {"HEXISTS", info_key("e"), "v"}), "0") << "an empty value is no field";
  EXPECT_EQ(other.election("g", "e").leader(), (Leader{"", leading.term()}));

  leading.resign();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

// A candidate without a value costs what a plain lock costs: the string form. A value
// proclaimed later turns it into the hash it stands for, with the same term and lease.
TEST(RedisElection, AnEmptyValueKeepsTheStringFormUntilAValueIsProclaimed) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  Leadership leading = client.election("g", "e", long_lease()).campaign("", Wait::none());
  ASSERT_TRUE(leading);
  EXPECT_EQ(probe.command({"TYPE", info_key("e")}), "string");
  leading.proclaim("ready");
  EXPECT_EQ(probe.command({"TYPE", info_key("e")}), "hash");
  EXPECT_EQ(probe.command({"HGET", info_key("e"), "v"}), "ready");
  EXPECT_GT(std::stoll(probe.command({"PTTL", info_key("e")})), 0) << "the hash has an expiry";
  EXPECT_TRUE(client.check(leading.lease().sequencer()));
  EXPECT_EQ(client.election("g", "e").leader(), (Leader{"ready", leading.term()}));
  leading.resign();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

// The contended path: a queued candidate's value is written by the call that grants it.
TEST(RedisElection, AWaitingCandidateIsGrantedWithItsOwnValue) {
  RedisServer server;
  RedisProbe probe(server);
  Client a = Client::open(server.uri());
  Client b = Client::open(server.uri());
  Leadership first = a.election("g", "e").campaign("a", Wait::none());
  ASSERT_TRUE(first);
  auto second = std::async(std::launch::async,
                           [&] { return b.election("g", "e").campaign("b", Wait::up_to(kNoHang)); });
  ASSERT_TRUE(eventually([&] { return queued(probe, "g", "e") == 1; }));
  first.resign();
  Leadership next = second.get();
  ASSERT_TRUE(next);
  EXPECT_EQ(probe.command({"HGET", info_key("e"), "v"}), "b") << "the old leader's value stayed";
  next.resign();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

// The engine itself: a proclaim on keys deleted behind its back (or naming another
// grant) answers false and writes nothing, in both forms of :i.
TEST(RedisElection, AProclaimOnAGrantTheServerNoLongerHoldsIsFalseAndWritesNothing) {
  RedisServer server;
  RedisProbe probe(server);
  auto engine = engines::redis::open(core::Uri::parse(server.uri()), ClientOptions{});
  for (const std::string value : {"", "v1"}) {
    SCOPED_TRACE("campaign value '" + value + "'");
    core::AcquireRequest request;
    request.key = core::LockKey{"g", "e"};
    request.options = long_lease();
    request.deadline = Clock::time_point::min();  // one attempt
    request.value = value;
    auto granted = engine->acquire(request);
    ASSERT_TRUE(granted);
    const core::GrantRef grant = granted->grant;

    core::GrantRef stranger = grant;
    stranger.owner += "-not";
    EXPECT_FALSE(engine->proclaim(stranger, "theirs")) << "another owner's proclaim";
    core::GrantRef older = grant;
    older.token -= 1;
    EXPECT_FALSE(engine->proclaim(older, "theirs")) << "another token's proclaim";
    ASSERT_EQ(engine->inspect(grant.key).holders.size(), 1u);
    EXPECT_EQ(engine->inspect(grant.key).holders[0].value, value) << "a refused proclaim wrote";

    probe.command({"DEL", info_key("e")});
    EXPECT_FALSE(engine->proclaim(grant, "still here?"));
    EXPECT_TRUE(probe.warden_keys().empty())
        << "a refused proclaim recreated:" << describe(probe.warden_keys());
    engine->release(grant);
  }
}

TEST(RedisElection, ALeaderWhoseKeysWereDeletedCannotProclaim) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  Election election = client.election("g", "e", long_lease());
  Leadership leading = election.campaign("a", Wait::none());
  ASSERT_TRUE(leading);
  probe.command({"DEL", info_key("e")});
  try {
    leading.proclaim("b");
    ADD_FAILURE() << "a leader the server no longer knows proclaimed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::lost) << e.what();
  }
  EXPECT_TRUE(probe.warden_keys().empty()) << "left:" << describe(probe.warden_keys());
  EXPECT_EQ(election.leader(), std::nullopt);
}

// An expired leader's value goes with its grant: the next holder (a plain lock here, so
// it brings no value of its own) never shows it, and its release leaves nothing.
TEST(RedisElection, AnExpiredLeadersValueIsGoneForTheNextHolder) {
  RedisServer server;
  RedisProbe probe(server);
  ClientOptions no_watchdog;
  no_watchdog.watchdog = false;
  Client stalled = Client::open(server.uri(), no_watchdog);
  Client next = Client::open(server.uri());
  Leadership old = stalled.election("g", "e", ttl(500ms)).campaign("old", Wait::none());
  ASSERT_TRUE(old);
  Lease lease = next.lock("g", "e").acquire(Mode::exclusive, Wait::up_to(kNoHang));
  ASSERT_TRUE(lease) << "the stalled leader's lease never ran out";
  EXPECT_EQ(probe.command({"HEXISTS", info_key("e"), "v"}), "0") << "the old value stayed";
  EXPECT_EQ(next.election("g", "e").leader(), (Leader{"", lease.token()}));
  lease.release();
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

// Nobody left at all: the hash with the value expires by itself.
TEST(RedisElection, AnAbandonedLeadersKeyExpiresWithItsValue) {
  RedisServer server;
  RedisProbe probe(server);
  ClientOptions no_watchdog;
  no_watchdog.watchdog = false;
  Client stalled = Client::open(server.uri(), no_watchdog);
  Leadership old = stalled.election("g", "e", ttl(200ms)).campaign("old", Wait::none());
  ASSERT_TRUE(old);
  EXPECT_GT(std::stoll(probe.command({"PTTL", info_key("e")})), 0);
  EXPECT_TRUE(no_warden_keys(probe, 0, kNoHang)) << "left:" << describe(probe.warden_keys());
}

// An observer is woken by what the scripts publish on the lock's channel (lua/lock.lua,
// announce): with a poll of an hour it still sees a grant, a proclaim and a resignation.
// (A lease that runs out publishes nothing; that is what the poll is for.)
TEST(RedisElection, AnObserverIsWokenByTheLocksChannelOnGrantProclaimAndResign) {
  RedisServer server;
  Client client = Client::open(server.uri());
  Client watcher = Client::open(server.uri());
  ObservedLeaders observed;
  std::jthread observer = observed.observe(watcher.election("g", "e"), std::chrono::hours(1));
  ASSERT_TRUE(observed.saw(std::nullopt)) << "the observer did not report the start";
  Leadership leading = client.election("g", "e").campaign("a", Wait::none());
  ASSERT_TRUE(leading);
  EXPECT_TRUE(observed.saw(Leader{"a", leading.term()})) << "a grant was not published";
  leading.proclaim("b");
  EXPECT_TRUE(observed.saw(Leader{"b", leading.term()})) << "a proclaim was not published";
  leading.resign();
  EXPECT_TRUE(observed.saw(std::nullopt)) << "a resignation was not published";
  observer.request_stop();
}

}  // namespace
}  // namespace warden::testing
