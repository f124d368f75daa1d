// tests/server/dispatcher_cache_test.cc — lock caching at wardend's dispatcher, with fake
// time and no sockets: REVOKES listeners, ACQUIRE ... CACHE id, and when (and how often)
// the server pushes REVOKE key token to a cached grant's listener.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dispatcher_test_support.h"
#include "server/dispatcher.h"
#include "server/password_hash.h"
#include "server/users_file.h"
#include "test_password_hashes.h"

namespace warden::server {
namespace {

using std::chrono::milliseconds;
using Outcome = Dispatcher::Outcome;
using Wakeups = std::vector<std::pair<ConnId, std::string>>;

const std::string kListening = "-ERR a listening connection takes only PING and QUIT\r\n";
const std::string kNotALock = "-INVALID a cached grant is a lock's (not with PERMITS or VALUE)\r\n";

// The push a listener gets: [REVOKE, key, token].
std::string revoke(std::string_view key, std::uint64_t token) {
  return "*3\r\n$6\r\nREVOKE\r\n$" + std::to_string(key.size()) + "\r\n" + std::string(key) +
         "\r\n:" + std::to_string(token) + "\r\n";
}

// A grant reply "*3\r\n:<token>\r\n:<waited_us>\r\n$32\r\n<secret>\r\n": its token (0 for
// any other reply) and secret.
struct Granted {
  std::uint64_t token = 0;
  std::string secret;
};
Granted granted(const std::string& reply) {
  if (!reply.starts_with("*3\r\n:")) return {};
  const auto at = reply.find("$32\r\n");
  if (at == std::string::npos) return {};
  return Granted{std::stoull(reply.substr(5)), reply.substr(at + 5, 32)};
}

// Connections 1..6 and 99 (INSPECT), requests as strings; remembers every grant's secret
// so that tests release by key and token.
class DispatcherCacheTest : public ::testing::Test {
 protected:
  DispatcherCacheTest() : d_(DispatcherConfig{{}, {}, "9.9.9", Time{}}, nullptr, nullptr) {
    for (ConnId c : {1, 2, 3, 4, 5, 6, 99}) EXPECT_TRUE(d_.connect(c));
  }

  Outcome run(ConnId conn, const std::vector<std::string>& args, Time now, std::string& reply) {
    std::vector<std::string_view> views(args.begin(), args.end());
    const Outcome outcome = d_.execute(conn, views, now, reply);
    note(reply);
    return outcome;
  }
  // A request answered at once.
  std::string call(ConnId conn, const std::vector<std::string>& args, Time now = at(0)) {
    std::string reply;
    EXPECT_EQ(run(conn, args, now, reply), Outcome::replied) << args[0] << ": " << reply;
    return reply;
  }
  // An ACQUIRE answered with a grant; returns its token.
  std::uint64_t hold(ConnId conn, const std::vector<std::string>& args, Time now = at(0)) {
    const std::string reply = call(conn, args, now);
    EXPECT_NE(granted(reply).token, 0u) << "not granted: " << reply;
    return granted(reply).token;
  }
  // A request that must park (a blocking ACQUIRE or ACQUIRESET not granted at once).
  void park(ConnId conn, const std::vector<std::string>& args, Time now = at(0)) {
    std::string reply;
    EXPECT_EQ(run(conn, args, now, reply), Outcome::parked) << "answered " << reply;
  }
  std::string release(ConnId conn, const std::string& key, std::uint64_t token, Time now = at(0)) {
    return call(conn, {"RELEASE", key, std::to_string(token), secrets_[token]}, now);
  }
  // The wakeups since the last call, grant replies reduced to "granted <token>".
  Wakeups wakeups() {
    Wakeups out;
    for (auto& w : d_.take_wakeups()) {
      note(w.reply);
      const auto g = granted(w.reply);
      out.emplace_back(w.conn, g.token ? "granted " + std::to_string(g.token) : w.reply);
    }
    return out;
  }
  std::size_t cached() const { return d_.stats().cached; }

  Dispatcher d_;

 private:
  void note(const std::string& reply) {
    if (const auto g = granted(reply); g.token != 0) secrets_[g.token] = g.secret;
  }
  std::map<std::uint64_t, std::string> secrets_;
};

// --- REVOKES

TEST_F(DispatcherCacheTest, RevokesRepliesTheListenerIdAndTheListenerThenTakesOnlyPingAndQuit) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(call(5, {"PING"}), "+PONG\r\n");
  EXPECT_EQ(call(5, {"PING", "hi"}), "$2\r\nhi\r\n");
  EXPECT_EQ(call(5, {"ACQUIRE", "g/k", "x", "1000"}), kListening);
  EXPECT_EQ(call(5, {"REVOKES"}), kListening) << "a second REVOKES";
  EXPECT_EQ(call(5, {"WATCH", "g/k"}), kListening);
  EXPECT_EQ(call(5, {"INFO"}), kListening);
  EXPECT_TRUE(d_.table().empty()) << "the refused ACQUIRE took nothing";
  EXPECT_EQ(wakeups(), Wakeups{});
  std::string reply;
  EXPECT_EQ(run(5, {"QUIT"}, at(0), reply), Outcome::close);
  EXPECT_EQ(reply, kOk);
}

TEST_F(DispatcherCacheTest, RevokesTakesNoArgumentsAndAWatcherCannotListen) {
  EXPECT_EQ(call(5, {"REVOKES", "g/k"}), "-ERR wrong number of arguments for 'REVOKES'\r\n");
  EXPECT_EQ(call(5, {"revokes"}), ":5\r\n") << "the refused one changed nothing";
  EXPECT_EQ(call(6, {"WATCH", "g/k"}), kOk);
  EXPECT_EQ(call(6, {"REVOKES"}), "-ERR a watching connection takes only PING and QUIT\r\n");
}

// --- when revokes are pushed

TEST_F(DispatcherCacheTest, AWaiterBehindACachedGrantPushesItsRevokeToTheListenerOnce) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "5"}), 1u);
  EXPECT_EQ(wakeups(), Wakeups{}) << "nobody wants it yet";
  EXPECT_EQ(cached(), 1u);
  park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(10));
  EXPECT_EQ(wakeups(), (Wakeups{{5, revoke("g/k", 1)}}));
  EXPECT_EQ(cached(), 0u);
  // Once per grant: a second waiter pushes nothing, and the grant is still held.
  park(3, {"ACQUIRE", "g/k", "s", "1000", "WAIT", "5000"}, at(20));
  EXPECT_EQ(wakeups(), Wakeups{});
  EXPECT_EQ(call(99, {"CHECK", "g/k", "x", "1"}, at(20)), kOne);
  // Its holder gives it back; the queue is served as usual.
  EXPECT_EQ(release(1, "g/k", 1, at(30)), kOne);
  EXPECT_EQ(wakeups(), (Wakeups{{2, "granted 2"}}));
}

TEST_F(DispatcherCacheTest, AFailedTryAlsoPushesTheRevokeSoATryAfterOneRoundTripFindsItFree) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "5"}), 1u);
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "s", "1000"}), kNil);
  EXPECT_EQ(wakeups(), (Wakeups{{5, revoke("g/k", 1)}}));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "x", "1000", "WAIT", "0"}), kNil);
  EXPECT_EQ(wakeups(), Wakeups{}) << "revoked once already";
  EXPECT_EQ(release(1, "g/k", 1, at(5)), kOne);
  EXPECT_EQ(hold(2, {"ACQUIRE", "g/k", "x", "1000"}, at(6)), 2u);
}

TEST_F(DispatcherCacheTest, GrantsNotCachedByALiveListenerArePushedNothing) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  // Without CACHE; naming a connection that does not listen; naming none at all.
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/a", "x", "1000"}), 1u);
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/b", "x", "1000", "CACHE", "2"}), 2u);
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/c", "x", "1000", "CACHE", "77"}), 3u);
  EXPECT_EQ(cached(), 0u);
  park(2, {"ACQUIRE", "g/a", "x", "1000", "FOREVER"});
  park(3, {"ACQUIRE", "g/b", "x", "1000", "FOREVER"});
  park(4, {"ACQUIRE", "g/c", "x", "1000", "FOREVER"});
  EXPECT_EQ(call(6, {"ACQUIRE", "g/a", "x", "1000"}), kNil);
  EXPECT_EQ(wakeups(), Wakeups{});
}

TEST_F(DispatcherCacheTest, CacheMayComeAnywhereAmongTheOptionsAndNameAnotherClientsListener) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(call(6, {"REVOKES"}), ":6\r\n");
  // The id only routes revokes: conn 1 and conn 2 use listeners of their choice.
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/a", "x", "1000", "CACHE", "6", "DELAY", "5"}), 1u);
  EXPECT_EQ(hold(2, {"ACQUIRE", "g/b", "s", "1000", "UNFAIR", "cache", "5", "WAIT", "10"}), 2u);
  EXPECT_EQ(cached(), 2u);
  EXPECT_EQ(call(3, {"ACQUIRE", "g/a", "x", "1000"}), kNil);
  EXPECT_EQ(call(3, {"ACQUIRE", "g/b", "x", "1000"}), kNil);
  EXPECT_EQ(wakeups(), (Wakeups{{6, revoke("g/a", 1)}, {5, revoke("g/b", 2)}}));
}

TEST_F(DispatcherCacheTest, ACachedGrantMadeFromTheQueueWhileOthersStillWaitIsRevokedAtOnce) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "x", "1000"}), 1u);
  park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER", "CACHE", "5"});
  park(3, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"});
  EXPECT_EQ(wakeups(), Wakeups{});
  EXPECT_EQ(release(1, "g/k", 1, at(10)), kOne);
  // The grant's reply first, then its revoke; nothing is kept.
  EXPECT_EQ(wakeups(), (Wakeups{{2, "granted 2"}, {5, revoke("g/k", 2)}}));
  EXPECT_EQ(cached(), 0u);
}

TEST_F(DispatcherCacheTest, ACachedGrantMadeFromTheQueueWithNobodyBehindItIsKept) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "x", "1000"}), 1u);
  park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER", "CACHE", "5"});
  EXPECT_EQ(release(1, "g/k", 1, at(10)), kOne);
  EXPECT_EQ(wakeups(), (Wakeups{{2, "granted 2"}}));
  EXPECT_EQ(cached(), 1u);
  park(3, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(20));
  EXPECT_EQ(wakeups(), (Wakeups{{5, revoke("g/k", 2)}}));
}

TEST_F(DispatcherCacheTest, AnUnfairCachedGrantBargingPastAQueueIsRevokedAtOnce) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "s", "1000"}), 1u);
  park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"});
  EXPECT_EQ(hold(3, {"ACQUIRE", "g/k", "s", "1000", "UNFAIR", "CACHE", "5"}), 2u);
  EXPECT_EQ(wakeups(), (Wakeups{{5, revoke("g/k", 2)}}));
  EXPECT_EQ(cached(), 0u);
}

TEST_F(DispatcherCacheTest, AnExclusiveWaiterRevokesEveryCachedSharedHolder) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(call(6, {"REVOKES"}), ":6\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "s", "1000", "CACHE", "5"}), 1u);
  EXPECT_EQ(hold(2, {"ACQUIRE", "g/k", "s", "1000", "CACHE", "6"}), 2u);
  EXPECT_EQ(hold(3, {"ACQUIRE", "g/k", "s", "1000"}), 3u);
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "s", "1000", "CACHE", "5"}), 4u);
  EXPECT_EQ(wakeups(), Wakeups{}) << "shared grants beside each other want nothing back";
  park(4, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(10));
  EXPECT_EQ(wakeups(),
            (Wakeups{{5, revoke("g/k", 1)}, {6, revoke("g/k", 2)}, {5, revoke("g/k", 4)}}));
  EXPECT_EQ(cached(), 0u);
}

TEST_F(DispatcherCacheTest, AnAcquireSetBlockedByACachedHolderPushesItsRevoke) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/b", "x", "1000", "CACHE", "5"}), 1u);
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/c", "x", "1000", "CACHE", "5"}), 2u);
  // A try: not granted at once, so its blocked member's holder is revoked.
  EXPECT_EQ(call(2, {"ACQUIRESET", "1000", "2", "g/a", "x", "g/b", "x"}), kNil);
  EXPECT_EQ(wakeups(), (Wakeups{{5, revoke("g/b", 1)}}));
  // A wait, the same.
  park(3, {"ACQUIRESET", "1000", "2", "g/c", "s", "g/d", "x", "FOREVER"}, at(10));
  EXPECT_EQ(wakeups(), (Wakeups{{5, revoke("g/c", 2)}}));
  EXPECT_EQ(cached(), 0u);
}

// --- entries live only as long as their grants

TEST_F(DispatcherCacheTest, AReleasedCachedGrantIsRevokedNoMore) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "5"}), 1u);
  EXPECT_EQ(release(1, "g/k", 1, at(10)), kOne);
  EXPECT_EQ(cached(), 0u);
  EXPECT_EQ(hold(2, {"ACQUIRE", "g/k", "x", "1000"}, at(20)), 2u);
  park(3, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(30));
  EXPECT_EQ(wakeups(), Wakeups{});
}

TEST_F(DispatcherCacheTest, AnExpiredCachedGrantIsRevokedNoMore) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "x", "100", "CACHE", "5"}), 1u);
  d_.advance(at(150));
  EXPECT_EQ(cached(), 0u);
  EXPECT_EQ(hold(2, {"ACQUIRE", "g/k", "x", "1000"}, at(160)), 2u);
  park(3, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(170));
  EXPECT_EQ(wakeups(), Wakeups{});
}

TEST_F(DispatcherCacheTest, AGrantGivenBackBecauseItsWaiterLeftLeavesNoEntry) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "x", "100"}), 1u);
  park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER", "CACHE", "5"});
  // The lease runs out while the waiter disconnects: it is granted while time is applied
  // and given back at once.
  d_.disconnect(2, at(200));
  EXPECT_EQ(cached(), 0u);
  EXPECT_TRUE(d_.table().empty());
  EXPECT_EQ(wakeups(), Wakeups{});
}

TEST_F(DispatcherCacheTest, AListenerThatDisconnectedIsPushedNothingAndNothingBreaks) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "5"}), 1u);
  d_.disconnect(5, at(10));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "x", "1000"}, at(20)), kNil);
  EXPECT_EQ(wakeups(), Wakeups{});
  EXPECT_EQ(cached(), 0u) << "dropped when its push found no listener";
  // A grant naming the gone listener is an ordinary one.
  EXPECT_EQ(hold(1, {"ACQUIRE", "g/j", "x", "1000", "CACHE", "5"}, at(30)), 2u);
  EXPECT_EQ(cached(), 0u);
  // The holder still releases, and the key serves others.
  EXPECT_EQ(release(1, "g/k", 1, at(40)), kOne);
  EXPECT_EQ(hold(2, {"ACQUIRE", "g/k", "x", "1000"}, at(50)), 3u);
}

// --- refused requests

TEST_F(DispatcherCacheTest, CacheWithPermitsOrValueIsInvalidAndChangesNothing) {
  EXPECT_EQ(call(5, {"REVOKES"}), ":5\r\n");
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "s", "1000", "PERMITS", "1", "3", "CACHE", "5"}), kNotALock);
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "5", "VALUE", "node-a"}), kNotALock);
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "5", "VALUE", ""}), kNotALock);
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "five"}),
            "-INVALID cache 'five' is not a non-negative integer\r\n");
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "-1"}),
            "-INVALID cache '-1' is not a non-negative integer\r\n");
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000", "CACHE"}),
            "-ERR unknown or incomplete ACQUIRE option 'CACHE'\r\n");
  EXPECT_TRUE(d_.table().empty());
  EXPECT_EQ(cached(), 0u);
  EXPECT_EQ(hold(2, {"ACQUIRE", "g/k", "x", "1000"}), 1u) << "the key is still free";
  EXPECT_EQ(wakeups(), Wakeups{});
}

TEST_F(DispatcherCacheTest, HelloOffersCachingFromProtocol7) {
  const std::string reply = call(1, {"HELLO"});
  EXPECT_NE(reply.find("$5\r\nproto\r\n:8\r\n"), std::string::npos) << reply;
  EXPECT_NE(reply.find(" watch cache "), std::string::npos) << reply;
}

// --- rights: REVOKES needs the lock right, on any group

TEST(DispatcherCacheRightsTest, RevokesNeedsTheLockRightOnAnyGroup) {
  DispatcherConfig config;
  config.version = "9.9.9";
  config.users = std::make_shared<const UserTable>(
      parse_users("locker " + hash_of("l-pass") + " billing lock\nauditor " + hash_of("a-pass") +
                      " * inspect\n",
                  "users.txt"));
  Dispatcher d(std::move(config), nullptr, nullptr);
  ASSERT_TRUE(d.connect(1));
  ASSERT_TRUE(d.connect(2));
  const auto run = [&](ConnId conn, std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    std::string reply;
    const Outcome outcome = d.execute(conn, views, at(0), reply);
    if (outcome == Outcome::parked) {  // AUTH user password: checked as the shell would
      for (const auto& check : d.take_auth_checks()) {
        d.auth_checked(check.id, verify_password(check.hash, check.password));
      }
      const auto wakeups = d.take_wakeups();
      return wakeups.size() == 1 ? wakeups[0].reply : std::string("<no answer>");
    }
    return reply;
  };
  EXPECT_EQ(run(1, {"REVOKES"}), "-NOAUTH authentication required\r\n");
  EXPECT_EQ(run(1, {"AUTH", "locker", "l-pass"}), kOk);
  EXPECT_EQ(run(1, {"REVOKES"}), ":1\r\n");
  EXPECT_EQ(run(2, {"AUTH", "auditor", "a-pass"}), kOk);
  EXPECT_EQ(run(2, {"REVOKES"}), "-NOPERM user 'auditor' has no lock right for REVOKES\r\n");
  EXPECT_EQ(run(2, {"PING"}), "+PONG\r\n") << "the refused REVOKES left it an ordinary connection";
}

// ACQUIRE … CACHE names a listener of the caller's own user, or none: another user's
// listener would learn of (and hold back) grants it has no right to.
TEST(DispatcherCacheRightsTest, CacheMayNameOnlyAListenerOfTheCallersOwnUser) {
  DispatcherConfig config;
  config.version = "9.9.9";
  config.users = std::make_shared<const UserTable>(
      parse_users("alice " + hash_of("a-pass") + " * lock\nbob " + hash_of("b-pass") + " * lock\n",
                  "users.txt"));
  Dispatcher d(std::move(config), nullptr, nullptr);
  for (ConnId c : {1, 2, 3}) ASSERT_TRUE(d.connect(c));
  const auto run = [&](ConnId conn, std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    std::string reply;
    if (d.execute(conn, views, at(0), reply) == Outcome::parked) {
      for (const auto& check : d.take_auth_checks()) {
        d.auth_checked(check.id, verify_password(check.hash, check.password));
      }
      const auto wakeups = d.take_wakeups();
      return wakeups.size() == 1 ? wakeups[0].reply : std::string("<no answer>");
    }
    return reply;
  };
  ASSERT_EQ(run(1, {"AUTH", "alice", "a-pass"}), kOk);
  ASSERT_EQ(run(2, {"AUTH", "alice", "a-pass"}), kOk);
  ASSERT_EQ(run(3, {"AUTH", "bob", "b-pass"}), kOk);
  ASSERT_EQ(run(1, {"REVOKES"}), ":1\r\n");
  EXPECT_EQ(run(3, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "1"}),
            "-NOPERM CACHE 1 is the revoke listener of another user\r\n");
  EXPECT_EQ(d.stats().cached, 0u);
  EXPECT_TRUE(granted(run(2, {"ACQUIRE", "g/k", "x", "1000", "CACHE", "1"})).token > 0)
      << "alice's other connection may name alice's listener";
  EXPECT_EQ(d.stats().cached, 1u);
}

}  // namespace
}  // namespace warden::server
