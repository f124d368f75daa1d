// tests/server/dispatcher_test.cc — wardend's command logic, driven with fake time and
// no sockets: each command and its reply bytes, parked ACQUIREs and their wakeups,
// connections that go away, limits, the restart embargo and durability failures.
#include "server/dispatcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dispatcher_test_support.h"
#include "support/info_fields.h"
#include "warden/election.h"
#include "warden/error.h"

namespace warden::server {
namespace {

using std::chrono::milliseconds;
using Outcome = Dispatcher::Outcome;

// Stands for the owner secret in replies and requests: the Harness takes each grant's
// secret out of its reply (after checking its form) and puts it back into RENEW and
// RELEASE requests that name the same token, so expectations can be written as bytes.
const std::string kOwner = "<owner>";

// The reply to a granted ACQUIRE: [token, waited_us, secret], its secret as kOwner.
std::string grant(std::uint64_t token, std::int64_t waited_us = 0) {
  return "*3\r\n:" + std::to_string(token) + "\r\n:" + std::to_string(waited_us) + "\r\n$32\r\n" +
         kOwner + "\r\n";
}

// The reply to a granted ACQUIRESET: one grant per member, in member order.
std::string set_grant(std::initializer_list<std::uint64_t> tokens, std::int64_t waited_us = 0) {
  std::string out = "*" + std::to_string(tokens.size()) + "\r\n";
  for (const std::uint64_t token : tokens) out += grant(token, waited_us);
  return out;
}

// The token in a grant reply ("*3\r\n:<token>\r\n..."); 0 if it is none.
std::uint64_t token_of(const std::string& reply) {
  if (!reply.starts_with("*3\r\n:")) return 0;
  return std::stoull(reply.substr(5));
}

bool is_secret(std::string_view s) {
  return s.size() == 32 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// INSPECT's reply, built from its parts.
struct HolderRow {
  std::string mode;
  std::int64_t token;
  std::int64_t ms_left;
};
struct WaiterRow {
  std::string mode;
  std::int64_t ms_to_deadline;  // -1: none
};
std::string integer(std::int64_t v) { return ":" + std::to_string(v) + "\r\n"; }
std::string inspect_reply(const std::vector<HolderRow>& holders,
                          const std::vector<WaiterRow>& waiters, std::int64_t delayed_ms = 0) {
  std::string out = "*6\r\n" + bulk("holders") + "*" + std::to_string(holders.size()) + "\r\n";
  for (const auto& h : holders) {
    out += "*3\r\n" + bulk(h.mode) + integer(h.token) + integer(h.ms_left);
  }
  out += bulk("waiters") + "*" + std::to_string(waiters.size()) + "\r\n";
  for (const auto& w : waiters) out += "*2\r\n" + bulk(w.mode) + integer(w.ms_to_deadline);
  out += bulk("delayed_ms") + integer(delayed_ms);
  return out;
}

// INFO's bulk string as key → value.
std::map<std::string, std::string> info_fields(const std::string& reply) {
  const auto header_end = reply.find("\r\n");
  if (!reply.starts_with("$") || header_end == std::string::npos) return {};
  return testing::info_fields(reply.substr(header_end + 2));
}

// A GrantGuard whose embargo and durability the test controls; it records every hold.
class StubGuard final : public GrantGuard {
 public:
  std::uint64_t embargo_ms(Time /*now*/) const override { return embargo; }
  void note_hold(milliseconds ttl_plus_delay) override {
    if (fail) throw Error(Errc::unavailable, "cannot store the state (injected)");
    holds.push_back(ttl_plus_delay.count());
  }
  std::int64_t longest_hold() const {
    std::int64_t longest = 0;
    for (auto h : holds) longest = std::max(longest, h);
    return longest;
  }

  std::uint64_t embargo = 0;
  bool fail = false;
  std::vector<std::int64_t> holds;
};

DispatcherConfig config(Limits limits = {}, std::string password = {}) {
  return DispatcherConfig{limits, std::move(password), "9.9.9", Time{}};
}

// A Dispatcher and shorthand for driving it: connections 1..n, requests as strings.
class Harness {
 public:
  explicit Harness(DispatcherConfig c = config(), GrantGuard* guard = nullptr)
      : d(std::move(c), nullptr, guard) {}

  void open(std::initializer_list<ConnId> conns) {
    for (ConnId c : conns) ASSERT_TRUE(d.connect(c)) << "connection " << c;
  }

  Outcome execute(ConnId conn, std::vector<std::string> args, Time now, std::string& reply) {
    // RENEW/RELEASE key token kOwner ...: the secret the grant with that token got.
    if (args.size() >= 4 && args[3] == kOwner) {
      const auto it = secrets.find(args[2]);
      args[3] = it != secrets.end() ? it->second : std::string(32, '0');
    }
    std::vector<std::string_view> views(args.begin(), args.end());
    const Outcome outcome = d.execute(conn, views, now, reply);
    reply = take_secret(reply);
    return outcome;
  }

  // A reply with the secret of every grant in it (checked: 32 lower-case hex) replaced by
  // kOwner and remembered by token: one grant, or an ACQUIRESET's array of them; any
  // other reply as it is.
  std::string take_secret(const std::string& reply) {
    std::string out;
    std::size_t pos = 0;
    for (std::size_t at; (at = reply.find("$32\r\n", pos)) != std::string::npos;) {
      const auto triple = reply.rfind("*3\r\n:", at);
      const std::uint64_t token =
          triple == std::string::npos || triple < pos ? 0 : token_of(reply.substr(triple));
      if (token == 0) break;
      const std::string secret = reply.substr(at + 5, 32);
      EXPECT_TRUE(is_secret(secret)) << reply;
      EXPECT_EQ(reply.substr(at + 5 + 32, 2), "\r\n") << reply;
      secrets[std::to_string(token)] = secret;
      out += reply.substr(pos, at + 5 - pos) + kOwner;
      pos = at + 5 + 32;
    }
    return out + reply.substr(pos);
  }

  // Runs a request that must be answered at once; returns the reply.
  std::string call(ConnId conn, const std::vector<std::string>& args, Time now) {
    std::string reply;
    const Outcome outcome = execute(conn, args, now, reply);
    EXPECT_EQ(outcome, Outcome::replied) << args[0] << " answered " << reply;
    return reply;
  }

  // Runs a request that must park (a blocking ACQUIRE that is not granted at once).
  void park(ConnId conn, const std::vector<std::string>& args, Time now) {
    std::string reply;
    EXPECT_EQ(execute(conn, args, now, reply), Outcome::parked) << "answered " << reply;
    EXPECT_EQ(reply, "");
  }

  // The wakeups since the last call, as (connection, reply).
  std::vector<std::pair<ConnId, std::string>> wakeups() {
    std::vector<std::pair<ConnId, std::string>> out;
    for (auto& w : d.take_wakeups()) out.emplace_back(w.conn, take_secret(w.reply));
    return out;
  }

  std::string inspect(const std::string& key, Time now) { return call(99, {"INSPECT", key}, now); }

  Dispatcher d;
  std::map<std::string, std::string> secrets;  // token → the secret its grant reply carried
};

using Wakeups = std::vector<std::pair<ConnId, std::string>>;

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { h_.open({1, 2, 3, 4, 99}); }
  std::string call(ConnId conn, const std::vector<std::string>& args, Time now = at(0)) {
    return h_.call(conn, args, now);
  }
  Harness h_;
};

// --- plain commands

TEST_F(DispatcherTest, PingAnswersPongOrEchoesItsArgument) {
  EXPECT_EQ(call(1, {"PING"}), "+PONG\r\n");
  EXPECT_EQ(call(1, {"PING", "hello"}), "$5\r\nhello\r\n");
  const std::string binary("a\0b\r\n", 5);
  EXPECT_EQ(call(1, {"PING", binary}), "$5\r\n" + binary + "\r\n");
}

TEST_F(DispatcherTest, CommandNamesAndModesAreCaseInsensitive) {
  EXPECT_EQ(call(1, {"ping"}), "+PONG\r\n");
  EXPECT_EQ(call(1, {"pInG"}), "+PONG\r\n");
  EXPECT_EQ(call(1, {"acquire", "g/a", "X", "1000"}), grant(1));
  EXPECT_EQ(call(1, {"Acquire", "g/b", "EXCLUSIVE", "1000", "wait", "0"}), grant(2));
  EXPECT_EQ(call(1, {"ACQUIRE", "g/c", "s", "1000", "unfair"}), grant(3));
  EXPECT_EQ(call(1, {"ACQUIRE", "g/c", "Shared", "1000", "Delay", "5"}), grant(4));
  EXPECT_EQ(call(1, {"check", "g/c", "SHARED", "3"}), kOne);
  EXPECT_EQ(call(1, {"release", "g/c", "3", kOwner}), kOne);
}

TEST_F(DispatcherTest, EmptyRequestIsSkippedWithoutAReply) {
  std::string reply;
  EXPECT_EQ(h_.d.execute(1, {}, at(0), reply), Outcome::replied);
  EXPECT_EQ(reply, "");
  EXPECT_EQ(h_.d.stats().commands, 0u);
}

TEST_F(DispatcherTest, UnknownCommandIsAnErrorAndTheConnectionGoesOn) {
  EXPECT_EQ(call(1, {"FLUSHALL"}), "-ERR unknown command 'FLUSHALL'\r\n");
  EXPECT_EQ(call(1, {"get", "x"}), "-ERR unknown command 'get'\r\n");
  // CR and LF from the request never break the reply line, and it stays short.
  EXPECT_EQ(call(1, {"a\r\nb"}), "-ERR unknown command 'ab'\r\n");
  const std::string reply = call(1, {std::string(10'000, 'Z')});
  EXPECT_LT(reply.size(), 200u);
  EXPECT_TRUE(reply.starts_with("-ERR unknown command 'ZZZ")) << reply;
  EXPECT_EQ(call(1, {"PING"}), "+PONG\r\n");
  EXPECT_EQ(h_.d.stats().errors, 4u);
}

TEST_F(DispatcherTest, WrongNumberOfArgumentsIsAnError) {
  const std::vector<std::vector<std::string>> bad = {
      {"PING", "a", "b"},
      {"ACQUIRE"},
      {"ACQUIRE", "g/k", "x"},
      {"RENEW", "g/k", "1"},
      {"RENEW", "g/k", "1", "1000"},  // no secret
      {"RENEW", "g/k", "1", kOwner, "1000", "extra"},
      {"RELEASE", "g/k"},
      {"RELEASE", "g/k", "1"},  // no secret
      {"RELEASE", "g/k", "1", kOwner, "2"},
      {"CHECK", "g/k", "x"},
      {"CHECK", "g/k", "x", "1", "2"},
      {"INSPECT"},
      {"INSPECT", "g/k", "g/j"},
      {"INFO", "a", "b"},
      {"AUTH"},
      {"AUTH", "a", "b", "c"},
  };
  for (const auto& args : bad) {
    std::string name = args[0];
    EXPECT_EQ(call(1, args), "-ERR wrong number of arguments for '" + name + "'\r\n") << name;
  }
  EXPECT_EQ(call(1, {"renew", "g/k"}), "-ERR wrong number of arguments for 'RENEW'\r\n");
  EXPECT_EQ(h_.d.stats().errors, bad.size() + 1);
  EXPECT_TRUE(h_.d.table().empty());
}

TEST_F(DispatcherTest, QuitAnswersOkAndClosesTheConnection) {
  std::string reply;
  EXPECT_EQ(h_.execute(1, {"QUIT"}, at(0), reply), Outcome::close);
  EXPECT_EQ(reply, kOk);
}

TEST_F(DispatcherTest, RequestOnAnUnknownConnectionIsAnErrorThatCloses) {
  std::string reply;
  EXPECT_EQ(h_.execute(42, {"PING"}, at(0), reply), Outcome::close);
  EXPECT_EQ(reply, "-ERR unknown connection\r\n");
}

// --- ACQUIRE: validation

TEST_F(DispatcherTest, BadKeyModeTtlWaitOrDelayIsInvalidAndChangesNothing) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"ACQUIRE", "nogroup", "x", "1000"}, "-INVALID key must be group/name\r\n"},
      {{"ACQUIRE", "/name", "x", "1000"}, "-INVALID "},
      {{"ACQUIRE", "group/", "x", "1000"}, "-INVALID "},
      {{"ACQUIRE", "bad group/name", "x", "1000"}, "-INVALID "},
      {{"ACQUIRE", std::string(65, 'g') + "/name", "x", "1000"}, "-INVALID "},
      {{"ACQUIRE", "g/" + std::string(513, 'n'), "x", "1000"}, "-INVALID "},
      {{"ACQUIRE", std::string("g/a\0b", 5), "x", "1000"}, "-INVALID "},
      {{"ACQUIRE", "g/k", "write", "1000"}, "-INVALID mode must be exclusive or shared\r\n"},
      {{"ACQUIRE", "g/k", "", "1000"}, "-INVALID mode must be exclusive or shared\r\n"},
      {{"ACQUIRE", "g/k", "x", "9"}, "-INVALID ttl 9 is outside 10..604800000 ms\r\n"},
      {{"ACQUIRE", "g/k", "x", "604800001"},
       "-INVALID ttl 604800001 is outside 10..604800000 ms\r\n"},
      {{"ACQUIRE", "g/k", "x", "abc"}, "-INVALID ttl 'abc' is not a non-negative integer\r\n"},
      {{"ACQUIRE", "g/k", "x", "-5"}, "-INVALID ttl '-5' is not a non-negative integer\r\n"},
      {{"ACQUIRE", "g/k", "x", "1000ms"},
       "-INVALID ttl '1000ms' is not a non-negative integer\r\n"},
      {{"ACQUIRE", "g/k", "x", ""}, "-INVALID ttl '' is not a non-negative integer\r\n"},
      {{"ACQUIRE", "g/k", "x", "99999999999999999999"}, "-INVALID ttl '99999999999999999999'"},
      {{"ACQUIRE", "g/k", "x", "1000", "WAIT", "-1"},
       "-INVALID wait '-1' is not a non-negative integer\r\n"},
      {{"ACQUIRE", "g/k", "x", "1000", "WAIT", "604800000001"}, "-INVALID wait 604800000001"},
      {{"ACQUIRE", "g/k", "x", "1000", "DELAY", "3600001"},
       "-INVALID delay 3600001 is outside 0..3600000 ms\r\n"},
      {{"ACQUIRE", "g/k", "x", "1000", "DELAY", "soon"}, "-INVALID delay 'soon'"},
      {{"ACQUIRE", "g/k", "x", "1000", "WAIT"},
       "-ERR unknown or incomplete ACQUIRE option 'WAIT'\r\n"},
      {{"ACQUIRE", "g/k", "x", "1000", "DELAY"},
       "-ERR unknown or incomplete ACQUIRE option 'DELAY'\r\n"},
      {{"ACQUIRE", "g/k", "x", "1000", "NOW"},
       "-ERR unknown or incomplete ACQUIRE option 'NOW'\r\n"},
  };
  for (const auto& [args, expected] : cases) {
    const std::string reply = call(1, args);
    EXPECT_TRUE(reply.starts_with(expected))
        << args[1] << " " << args[2] << " " << args[3] << ": " << reply;
    EXPECT_TRUE(reply.ends_with("\r\n"));
    EXPECT_EQ(reply.find_first_of("\r\n"), reply.size() - 2) << "one line: " << reply;
  }
  EXPECT_TRUE(h_.d.table().empty());
  EXPECT_EQ(h_.d.stats().parked, 0u);
  // No token was drawn for any of them.
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
}

TEST_F(DispatcherTest, TtlAndDelayBoundsAreInclusive) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/a", "x", "10"}), grant(1));
  EXPECT_EQ(call(1, {"ACQUIRE", "g/b", "x", "604800000"}), grant(2));
  EXPECT_EQ(call(1, {"ACQUIRE", "g/c", "x", "1000", "DELAY", "3600000"}), grant(3));
  EXPECT_EQ(call(1, {"ACQUIRE", "g/d", "x", "1000", "DELAY", "0"}), grant(4));
}

// --- ACQUIRE ... PERMITS: semaphores

TEST_F(DispatcherTest, PermitsAreGrantedWhileTheyFitAndAnotherCountIsInvalid) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "2", "3"}), grant(1));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/s", "shared", "1000", "permits", "1", "3"}), grant(2));
  EXPECT_EQ(call(3, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "1", "3"}), kNil);
  const std::string other = call(3, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "1", "4"});
  EXPECT_TRUE(other.starts_with("-INVALID the key is a semaphore of another number")) << other;
  EXPECT_TRUE(call(3, {"ACQUIRE", "g/s", "x", "1000"}).starts_with("-INVALID "))
      << "a lock request on a semaphore";
  EXPECT_EQ(h_.d.table().stats().holders, 2u);
  EXPECT_EQ(h_.d.table().inspect("g/s").capacity, 3u);
  // A third grant draws the next token: the refusals drew none.
  EXPECT_EQ(call(1, {"RELEASE", "g/s", "1", kOwner}), kOne);
  EXPECT_EQ(call(3, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "2", "3"}), grant(3));
}

TEST_F(DispatcherTest, BadPermitsAreInvalidAndChangeNothing) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"ACQUIRE", "g/s", "s", "1000", "PERMITS", "0", "3"},
       "-INVALID permits 0 is outside 1..1000000\r\n"},
      {{"ACQUIRE", "g/s", "s", "1000", "PERMITS", "4", "3"},
       "-INVALID permits 4 are more than the semaphore's 3\r\n"},
      {{"ACQUIRE", "g/s", "s", "1000", "PERMITS", "1", "1000001"},
       "-INVALID of 1000001 is outside 1..1000000\r\n"},
      {{"ACQUIRE", "g/s", "s", "1000", "PERMITS", "one", "3"}, "-INVALID permits 'one'"},
      {{"ACQUIRE", "g/s", "x", "1000", "PERMITS", "1", "3"},
       "-INVALID a semaphore's request (PERMITS) is shared\r\n"},
      {{"ACQUIRE", "g/s", "s", "1000", "PERMITS", "1"},
       "-ERR unknown or incomplete ACQUIRE option 'PERMITS'\r\n"},
  };
  for (const auto& [args, expected] : cases) {
    const std::string reply = call(1, args);
    EXPECT_TRUE(reply.starts_with(expected)) << args[5] << ": " << reply;
  }
  EXPECT_TRUE(h_.d.table().empty());
}

TEST_F(DispatcherTest, LargeSemaphoreRequestWaitsItsTurnAndIsWokenWhenPermitsFree) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "2", "3"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "3", "3", "FOREVER"}, at(0));
  EXPECT_EQ(call(3, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "1", "3"}), kNil)
      << "one is free, but the request for three is first";
  EXPECT_EQ(call(1, {"RELEASE", "g/s", "1", kOwner}, at(5)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 5000)}}));
}

// --- ACQUIRESET: multi-locks in one step

TEST_F(DispatcherTest, AcquireSetGrantsEveryMemberAtOnceWithItsOwnSecret) {
  EXPECT_EQ(call(1, {"ACQUIRESET", "1000", "2", "g/a", "x", "g/b", "shared"}), set_grant({1, 2}));
  EXPECT_NE(h_.secrets.at("1"), h_.secrets.at("2"));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/b", "s", "1000"}), grant(3)) << "b is held shared";
  // Each member is renewed and released on its own, with its own secret.
  EXPECT_EQ(call(1, {"RELEASE", "g/a", "1", kOwner}), kOne);
  EXPECT_EQ(call(1, {"RENEW", "g/b", "2", kOwner, "1000"}), kOne);
  EXPECT_EQ(call(3, {"ACQUIRE", "g/a", "x", "1000"}), grant(4));
}

TEST_F(DispatcherTest, ParkedSetHoldsNothingAndIsWokenWithEveryGrant) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/b", "x", "1000"}), grant(1));
  h_.park(2, {"ACQUIRESET", "1000", "2", "g/a", "x", "g/b", "x", "FOREVER"}, at(0));
  EXPECT_EQ(call(3, {"ACQUIRE", "g/c", "x", "1000"}), grant(2));
  EXPECT_EQ(call(3, {"ACQUIRE", "g/a", "x", "1000", "UNFAIR"}), grant(3))
      << "a is free while the set waits (non-fair passes its place)";
  EXPECT_EQ(call(3, {"RELEASE", "g/a", "3", kOwner}), kOne);
  EXPECT_TRUE(h_.wakeups().empty()) << "b is still held";
  EXPECT_EQ(call(1, {"RELEASE", "g/b", "1", kOwner}, at(7)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, set_grant({4, 5}, 7000)}}));
  EXPECT_EQ(call(2, {"RELEASE", "g/b", "5", kOwner}), kOne);
}

TEST_F(DispatcherTest, SetWaitEndsWithNilAndLeavesNoTrace) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/b", "x", "1000"}), grant(1));
  EXPECT_EQ(call(2, {"ACQUIRESET", "1000", "2", "g/a", "x", "g/b", "x"}), kNil) << "a try";
  h_.park(2, {"ACQUIRESET", "1000", "2", "g/a", "x", "g/b", "x", "WAIT", "50"}, at(0));
  h_.d.advance(at(50));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, kNil}}));
  h_.park(3, {"ACQUIRESET", "1000", "2", "g/a", "x", "g/b", "x", "FOREVER"}, at(60));
  h_.d.disconnect(3, at(61));
  EXPECT_EQ(h_.d.table().stats().waiters, 0u);
  EXPECT_EQ(h_.d.table().stats().keys, 1u) << "only b, held";
}

TEST_F(DispatcherTest, BadSetsAreRefusedAndChangeNothing) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"ACQUIRESET", "1000", "2", "g/a", "x"}, "-ERR wrong number of arguments"},
      {{"ACQUIRESET", "1000", "0", "g/a", "x"}, "-INVALID members 0 is outside 1..1024"},
      {{"ACQUIRESET", "1000", "1", "nogroup", "x"}, "-INVALID key must be group/name"},
      {{"ACQUIRESET", "1000", "1", "g/a", "read"}, "-INVALID mode must be"},
      {{"ACQUIRESET", "5", "1", "g/a", "x"}, "-INVALID ttl 5 is outside"},
      {{"ACQUIRESET", "1000", "2", "g/a", "x", "g/a", "s"}, "-INVALID a set names one key twice"},
      {{"ACQUIRESET", "1000", "1", "g/a", "x", "PERMITS", "1", "2"},
       "-ERR unknown or incomplete ACQUIRESET option 'PERMITS'"},
  };
  for (const auto& [args, expected] : cases) {
    const std::string reply = call(1, args);
    EXPECT_TRUE(reply.starts_with(expected)) << expected << ": " << reply;
  }
  EXPECT_TRUE(h_.d.table().empty());
}

// --- ACQUIRE: try, WAIT, FOREVER

TEST_F(DispatcherTest, TryIsGrantedAtOnceOrAnsweredNil) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "exclusive", "1000"}), grant(1));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "exclusive", "1000"}), kNil);
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "shared", "1000"}), kNil);
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "x", "1000", "WAIT", "0"}), kNil);
  EXPECT_EQ(h_.d.table().stats().waiters, 0u);
  EXPECT_TRUE(h_.wakeups().empty());
}

TEST_F(DispatcherTest, SharedGrantsAreHeldTogetherAndExcludeExclusive) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "s", "1000"}), grant(1));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "s", "1000"}), grant(2));
  EXPECT_EQ(call(3, {"ACQUIRE", "g/k", "x", "1000"}), kNil);
  EXPECT_EQ(h_.d.table().stats().holders, 2u);
}

TEST_F(DispatcherTest, UnfairRequestBargesPastTheQueue) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "s", "1000"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0));
  EXPECT_EQ(call(3, {"ACQUIRE", "g/k", "s", "1000"}), kNil);  // fair: behind the writer
  EXPECT_EQ(call(3, {"ACQUIRE", "g/k", "s", "1000", "UNFAIR"}), grant(2));
}

TEST_F(DispatcherTest, WaitParksUntilItsDeadlineThenAnswersNil) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "10000"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "WAIT", "100"}, at(50));
  EXPECT_EQ(h_.d.stats().parked, 1u);
  EXPECT_EQ(h_.d.next_wakeup(), at(150));

  h_.d.advance(at(149));
  EXPECT_TRUE(h_.wakeups().empty());
  h_.d.advance(at(150));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, kNil}}));
  EXPECT_EQ(h_.d.stats().parked, 0u);
  EXPECT_EQ(h_.d.stats().timeouts, 1u);
  EXPECT_EQ(h_.d.table().stats().waiters, 0u);
  h_.d.advance(at(5000));
  EXPECT_TRUE(h_.wakeups().empty());  // one wakeup per parked request, never two
  // The connection is free for its next request.
  EXPECT_EQ(call(2, {"PING"}, at(5000)), "+PONG\r\n");
}

TEST_F(DispatcherTest, ForeverWaitsUntilGranted) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0));
  EXPECT_EQ(h_.inspect("g/k", at(0)), inspect_reply({{"exclusive", 1, 1000}}, {{"exclusive", -1}}));
  // Renewed for an hour; the waiter stays.
  for (int t = 500; t < 3'600'000; t += 500) {
    ASSERT_EQ(call(1, {"RENEW", "g/k", "1", kOwner, "1000"}, at(t)), kOne);
  }
  EXPECT_TRUE(h_.wakeups().empty());
  EXPECT_EQ(call(1, {"RELEASE", "g/k", "1", kOwner}, at(3'600'000)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 3'600'000'000)}}));
}

TEST_F(DispatcherTest, ReleaseFromAnotherConnectionWakesTheParkedAcquireWithItsWaitedTime) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "30000"}, at(0)), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "30000", "WAIT", "5000"}, at(10));
  EXPECT_TRUE(h_.wakeups().empty());

  EXPECT_EQ(call(3, {"RELEASE", "g/k", "1", kOwner}, at(250)), kOne);
  // Waited from reading the request (10 ms) to the grant (250 ms).
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 240'000)}}));
  EXPECT_EQ(call(4, {"CHECK", "g/k", "x", "2"}, at(251)), kOne);
  EXPECT_EQ(h_.d.stats().grants, 2u);
  EXPECT_EQ(h_.d.stats().parked, 0u);
}

TEST_F(DispatcherTest, LeaseExpiryWakesTheParkedAcquire) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "100"}, at(0)), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(20));
  EXPECT_EQ(h_.d.next_wakeup(), at(100));
  h_.d.advance(at(100));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 80'000)}}));
  EXPECT_EQ(h_.d.stats().expirations, 1u);
  EXPECT_EQ(call(1, {"RENEW", "g/k", "1", kOwner, "1000"}, at(101)), kZero);  // too late
}

TEST_F(DispatcherTest, SharedWaitersBehindAReleasedWriterAreWokenTogether) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "s", "1000", "FOREVER"}, at(0));
  h_.park(3, {"ACQUIRE", "g/k", "s", "1000", "FOREVER"}, at(0));
  h_.park(4, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0));
  EXPECT_EQ(call(1, {"RELEASE", "g/k", "1", kOwner}, at(7)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 7000)}, {3, grant(3, 7000)}}));
  EXPECT_EQ(h_.d.stats().parked, 1u);
}

// --- connections that go away

TEST_F(DispatcherTest, DisconnectRemovesTheParkedWaiterAtOnce) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "s", "1000"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0));
  h_.park(3, {"ACQUIRE", "g/k", "s", "1000", "FOREVER"}, at(0));
  EXPECT_EQ(h_.d.table().stats().waiters, 2u);

  // The writer at the head leaves: the reader behind it shares with the holder at once.
  h_.d.disconnect(2, at(5));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{3, grant(2, 5000)}}));
  EXPECT_EQ(h_.inspect("g/k", at(5)), inspect_reply({{"shared", 1, 995}, {"shared", 2, 1000}}, {}));
  EXPECT_EQ(h_.d.stats().connections, 4u);
  EXPECT_EQ(h_.d.stats().parked, 0u);
  h_.d.advance(at(10'000));
  for (const auto& [conn, reply] : h_.wakeups()) EXPECT_NE(conn, 2u) << reply;
}

TEST_F(DispatcherTest, DisconnectOfAWaiterInTheMiddleLetsTheOneBehindMoveUp) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0));
  h_.park(3, {"ACQUIRE", "g/k", "x", "1000", "WAIT", "900"}, at(0));
  h_.d.disconnect(2, at(1));
  EXPECT_TRUE(h_.wakeups().empty());
  EXPECT_EQ(h_.inspect("g/k", at(1)), inspect_reply({{"exclusive", 1, 999}}, {{"exclusive", 899}}));
  EXPECT_EQ(call(1, {"RELEASE", "g/k", "1", kOwner}, at(2)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{3, grant(2, 2000)}}));
}

TEST_F(DispatcherTest, DisconnectKeepsTheConnectionsGrants) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  h_.d.disconnect(1, at(1));
  EXPECT_EQ(call(2, {"CHECK", "g/k", "exclusive", "1"}, at(2)), kOne);
  EXPECT_EQ(call(2, {"RENEW", "g/k", "1", kOwner, "1000"}, at(3)), kOne);
  EXPECT_EQ(call(2, {"RELEASE", "g/k", "1", kOwner}, at(4)), kOne);
  EXPECT_TRUE(h_.d.table().empty());
}

TEST_F(DispatcherTest, DisconnectOfAWaiterGrantedByLapsedTimeGivesTheGrantToTheNextWaiter) {
  // The holder's lease ran out at 100 but nothing applied the time until the waiter at
  // the head disconnected at 150: the table grants the head, which is gone, so the
  // grant is given back and the next waiter gets it within the same call.
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "100"}, at(0)), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(10));
  h_.park(3, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(20));
  h_.d.disconnect(2, at(150));
  const auto wakeups = h_.wakeups();
  ASSERT_EQ(wakeups.size(), 1u);
  EXPECT_EQ(wakeups[0].first, 3u);
  const std::uint64_t token = token_of(wakeups[0].second);
  EXPECT_EQ(wakeups[0].second, grant(token, 130'000));
  EXPECT_EQ(h_.inspect("g/k", at(150)),
            inspect_reply({{"exclusive", static_cast<std::int64_t>(token), 1000}}, {}));
}

TEST_F(DispatcherTest, CancelParkedAnswersNilAndLeavesNoTrace) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "WAIT", "500"}, at(0));
  h_.d.cancel_parked(2, at(10));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, kNil}}));
  EXPECT_EQ(h_.d.table().stats().waiters, 0u);
  EXPECT_EQ(h_.d.stats().parked, 0u);
  h_.d.cancel_parked(2, at(11));  // nothing parked: nothing happens
  h_.d.advance(at(1000));
  EXPECT_TRUE(h_.wakeups().empty());
  EXPECT_EQ(call(2, {"PING"}, at(1000)), "+PONG\r\n");
}

TEST_F(DispatcherTest, CancelParkedAfterTheGrantLeavesTheGrantWakeup) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0));
  EXPECT_EQ(call(1, {"RELEASE", "g/k", "1", kOwner}, at(5)),
            kOne);  // granted, wakeup not yet taken
  h_.d.cancel_parked(2, at(6));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 5000)}}));
  EXPECT_EQ(call(3, {"CHECK", "g/k", "x", "2"}, at(7)), kOne);
}

TEST_F(DispatcherTest, CancelParkedWhoseGrantIsDueAtThatTimeAnswersTheGrant) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "100"}, at(0)), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0));
  // The lease ran out at 100; applying the time up to 150 grants the waiter first.
  h_.d.cancel_parked(2, at(150));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 150'000)}}));
  EXPECT_EQ(call(3, {"CHECK", "g/k", "x", "2"}, at(151)), kOne);
}

// --- RENEW, RELEASE, CHECK by token

TEST_F(DispatcherTest, RenewReleaseAndCheckWorkByTokenFromAnyConnection) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}, at(0)), grant(1));
  EXPECT_EQ(call(2, {"CHECK", "g/k", "exclusive", "1"}, at(1)), kOne);
  EXPECT_EQ(call(2, {"CHECK", "g/k", "shared", "1"}, at(1)), kZero);
  EXPECT_EQ(call(2, {"CHECK", "g/k", "x", "2"}, at(1)), kZero);
  EXPECT_EQ(call(2, {"CHECK", "g/other", "x", "1"}, at(1)), kZero);
  EXPECT_EQ(call(3, {"RENEW", "g/k", "1", kOwner, "5000"}, at(900)), kOne);
  EXPECT_EQ(call(3, {"RENEW", "g/k", "2", kOwner, "5000"}, at(900)), kZero);
  EXPECT_EQ(call(3, {"RENEW", "g/other", "1", kOwner, "5000"}, at(900)), kZero);
  EXPECT_EQ(h_.inspect("g/k", at(1000)), inspect_reply({{"exclusive", 1, 4900}}, {}));
  EXPECT_EQ(call(4, {"RELEASE", "g/k", "2", kOwner}, at(1001)), kZero);
  EXPECT_EQ(call(4, {"RELEASE", "g/k", "1", kOwner}, at(1001)), kOne);
  EXPECT_EQ(call(4, {"RELEASE", "g/k", "1", kOwner}, at(1002)), kZero);  // idempotent
  EXPECT_EQ(call(1, {"RENEW", "g/k", "1", kOwner, "5000"}, at(1003)), kZero);
  EXPECT_EQ(call(1, {"CHECK", "g/k", "x", "1"}, at(1003)), kZero);
  EXPECT_TRUE(h_.d.table().empty());
}

// --- owner secrets: only the holder renews or releases

TEST_F(DispatcherTest, EachGrantCarriesItsOwnRandomSecretOf32HexCharacters) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(call(1, {"ACQUIRE", "g/s", "s", "1000"}), grant(i + 1));
    const std::string secret = h_.secrets.at(std::to_string(i + 1));
    EXPECT_TRUE(is_secret(secret)) << secret;
    EXPECT_TRUE(seen.insert(secret).second) << "secret repeated: " << secret;
  }
  // A queued request gets its secret when it is granted.
  EXPECT_EQ(call(1, {"ACQUIRE", "g/q", "x", "1000"}), grant(51));
  h_.park(2, {"ACQUIRE", "g/q", "x", "1000", "FOREVER"}, at(0));
  EXPECT_EQ(call(1, {"RELEASE", "g/q", "51", kOwner}, at(1)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(52, 1000)}}));
  EXPECT_TRUE(seen.insert(h_.secrets.at("52")).second);
  EXPECT_EQ(call(2, {"RENEW", "g/q", "52", kOwner, "1000"}, at(2)), kOne);
}

TEST_F(DispatcherTest, WrongSecretIsAnsweredLikeAGrantNotHeldAndChangesNothing) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}, at(0)), grant(1));
  const std::string right = h_.secrets.at("1");
  std::string wrong = right;
  wrong[31] = wrong[31] == '0' ? '1' : '0';  // one bit of difference is enough
  const std::string before = h_.inspect("g/k", at(10));
  for (const std::string& secret : {wrong, std::string(32, '0'), std::string(32, 'f')}) {
    EXPECT_EQ(call(2, {"RENEW", "g/k", "1", secret, "60000"}, at(10)), kZero) << secret;
    EXPECT_EQ(call(2, {"RELEASE", "g/k", "1", secret}, at(10)), kZero) << secret;
    // Exactly the answer for a token that has no grant: nothing tells them apart.
    EXPECT_EQ(call(2, {"RENEW", "g/k", "2", secret, "60000"}, at(10)), kZero);
    EXPECT_EQ(call(2, {"RELEASE", "g/k", "2", secret}, at(10)), kZero);
  }
  EXPECT_EQ(h_.inspect("g/k", at(10)), before);  // not renewed, not released
  EXPECT_EQ(call(3, {"CHECK", "g/k", "x", "1"}, at(10)), kOne);
  EXPECT_EQ(call(3, {"ACQUIRE", "g/k", "x", "1000"}, at(10)), kNil);
  // The holder's secret works, from any connection.
  EXPECT_EQ(call(3, {"RENEW", "g/k", "1", right, "5000"}, at(20)), kOne);
  EXPECT_EQ(h_.inspect("g/k", at(20)), inspect_reply({{"exclusive", 1, 5000}}, {}));
  EXPECT_EQ(call(4, {"RELEASE", "g/k", "1", right}, at(30)), kOne);
  EXPECT_TRUE(h_.d.table().empty());
}

TEST_F(DispatcherTest, SecretOfOneGrantDoesNotOpenAnother) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "s", "1000"}), grant(1));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "s", "1000"}), grant(2));
  EXPECT_EQ(call(3, {"ACQUIRE", "g/j", "x", "1000"}), grant(3));
  const std::string first = h_.secrets.at("1");
  EXPECT_EQ(call(1, {"RELEASE", "g/k", "2", first}), kZero);
  EXPECT_EQ(call(1, {"RELEASE", "g/j", "3", first}), kZero);
  EXPECT_EQ(call(1, {"RENEW", "g/j", "3", first, "5000"}), kZero);
  EXPECT_EQ(h_.d.table().stats().holders, 3u);
}

TEST_F(DispatcherTest, MalformedSecretIsInvalidWhetherOrNotTheGrantExists) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  const std::string upper_case(32, 'A');
  for (const std::string& bad : {std::string(), std::string("abc"), std::string(31, 'a'),
                                 std::string(33, 'a'), upper_case, std::string(32, 'g')}) {
    for (const char* token : {"1", "2"}) {
      const std::string invalid = "-INVALID secret must be 32 lower-case hex characters\r\n";
      EXPECT_EQ(call(2, {"RENEW", "g/k", token, bad, "1000"}), invalid) << bad;
      EXPECT_EQ(call(2, {"RELEASE", "g/k", token, bad}), invalid) << bad;
    }
  }
  EXPECT_EQ(call(3, {"CHECK", "g/k", "x", "1"}), kOne);
}

TEST_F(DispatcherTest, SecretsNeverAppearInInspectListOrInfo) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/j", "s", "1000"}), grant(2));
  std::vector<std::string> outputs = {h_.inspect("g/k", at(1)), h_.inspect("g/j", at(1)),
                                      call(3, {"LIST", "g"}, at(1)), call(3, {"INFO"}, at(1)),
                                      call(3, {"HELLO"}, at(1))};
  for (const auto& [token, secret] : h_.secrets) {
    for (const auto& out : outputs) EXPECT_EQ(out.find(secret), std::string::npos) << out;
  }
}

TEST_F(DispatcherTest, SecretOfAnExpiredGrantIsForgotten) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "100"}, at(0)), grant(1));
  const std::string secret = h_.secrets.at("1");
  h_.d.advance(at(200));
  EXPECT_EQ(call(1, {"RENEW", "g/k", "1", secret, "1000"}, at(200)), kZero);
  EXPECT_EQ(call(1, {"RELEASE", "g/k", "1", secret}, at(200)), kZero);
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "x", "100"}, at(200)), grant(2));
  EXPECT_EQ(call(1, {"RELEASE", "g/k", "2", secret}, at(201)), kZero);
  EXPECT_EQ(call(2, {"CHECK", "g/k", "x", "2"}, at(201)), kOne);
}

TEST_F(DispatcherTest, BadTokenTtlOrKeyInRenewReleaseCheckIsInvalid) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}), grant(1));
  EXPECT_TRUE(call(1, {"RENEW", "g/k", "one", kOwner, "1000"}).starts_with("-INVALID token 'one'"));
  EXPECT_TRUE(call(1, {"RENEW", "g/k", "1", kOwner, "5"}).starts_with("-INVALID ttl 5 is outside"));
  EXPECT_TRUE(call(1, {"RENEW", "nokey", "1", kOwner, "1000"}).starts_with("-INVALID key"));
  EXPECT_TRUE(call(1, {"RELEASE", "g/k", "-1", kOwner}).starts_with("-INVALID token '-1'"));
  EXPECT_TRUE(call(1, {"RELEASE", "g/", "1", kOwner}).starts_with("-INVALID "));
  EXPECT_TRUE(call(1, {"CHECK", "g/k", "rw", "1"}).starts_with("-INVALID mode"));
  EXPECT_TRUE(call(1, {"CHECK", "g/k", "x", "1.0"}).starts_with("-INVALID token"));
  EXPECT_TRUE(call(1, {"INSPECT", "k"}).starts_with("-INVALID key"));
  EXPECT_EQ(call(1, {"CHECK", "g/k", "x", "1"}), kOne);
  EXPECT_EQ(h_.inspect("g/k", at(0)), inspect_reply({{"exclusive", 1, 1000}}, {}));
}

TEST_F(DispatcherTest, LeaseExpiresWhenTimeIsApplied) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "100"}, at(0)), grant(1));
  EXPECT_EQ(h_.d.next_wakeup(), at(100));
  h_.d.advance(at(99));
  EXPECT_EQ(h_.d.table().stats().holders, 1u);
  h_.d.advance(at(100));
  EXPECT_EQ(h_.d.table().stats().holders, 0u);
  EXPECT_EQ(h_.d.stats().expirations, 1u);
  EXPECT_FALSE(h_.d.next_wakeup().has_value());
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "x", "100"}, at(100)), grant(2));
}

TEST_F(DispatcherTest, CheckAndInspectApplyTheTimeThemselves) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "100"}, at(0)), grant(1));
  EXPECT_EQ(call(2, {"CHECK", "g/k", "x", "1"}, at(100)), kZero);  // no advance() in between
  EXPECT_EQ(call(1, {"ACQUIRE", "g/j", "x", "100"}, at(100)), grant(2));
  EXPECT_EQ(h_.inspect("g/j", at(200)), inspect_reply({}, {}));
}

TEST_F(DispatcherTest, ExpiredLeaseWithLockDelayBlocksTheKeyForTheDelay) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "100", "DELAY", "500"}, at(0)), grant(1));
  h_.d.advance(at(100));
  EXPECT_EQ(h_.inspect("g/k", at(300)), inspect_reply({}, {}, 300));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "x", "100"}, at(300)), kNil);
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "s", "100", "UNFAIR"}, at(300)), kNil);
  h_.park(2, {"ACQUIRE", "g/k", "x", "100", "FOREVER"}, at(300));
  EXPECT_EQ(h_.d.next_wakeup(), at(600));
  h_.d.advance(at(600));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 300'000)}}));
}

TEST_F(DispatcherTest, ReleasedLeaseStartsNoLockDelay) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "100", "DELAY", "500"}, at(0)), grant(1));
  EXPECT_EQ(call(1, {"RELEASE", "g/k", "1", kOwner}, at(50)), kOne);
  EXPECT_EQ(call(2, {"ACQUIRE", "g/k", "x", "100"}, at(50)), grant(2));
}

// --- limits

TEST(DispatcherLimitsTest, ConnectionLimitRefusesTheNextConnectionAndChangesNothing) {
  Harness h(config(Limits{.max_connections = 2}));
  EXPECT_TRUE(h.d.connect(1));
  EXPECT_TRUE(h.d.connect(2));
  EXPECT_FALSE(h.d.connect(3));
  EXPECT_EQ(h.d.stats().connections, 2u);
  std::string reply;
  EXPECT_EQ(h.execute(3, {"PING"}, at(0), reply), Outcome::close);
  h.d.disconnect(1, at(0));
  EXPECT_TRUE(h.d.connect(3));
  EXPECT_EQ(h.call(3, {"PING"}, at(0)), "+PONG\r\n");
}

TEST(DispatcherLimitsTest, KeyLimitRefusesNewKeysButNotKnownOnes) {
  Harness h(config(Limits{.max_keys = 2}));
  h.open({1, 2, 99});
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/a", "x", "1000"}, at(0)), grant(1));
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/b", "x", "1000"}, at(0)), grant(2));
  const auto before = h.d.table().stats();
  const std::string limit = "-LIMIT the server holds the maximum number of keys\r\n";
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/c", "x", "1000"}, at(1)), limit);
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/c", "x", "1000", "FOREVER"}, at(1)), limit);
  EXPECT_EQ(h.d.table().stats().keys, before.keys);
  EXPECT_EQ(h.d.table().stats().holders, before.holders);
  EXPECT_EQ(h.d.table().stats().waiters, 0u);
  EXPECT_EQ(h.d.stats().parked, 0u);
  // A key the table already knows is no new key.
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/a", "x", "1000"}, at(1)), kNil);
  h.park(2, {"ACQUIRE", "g/a", "x", "1000", "FOREVER"}, at(1));
  // Once a key is gone there is room again; no token was spent on the refusals.
  EXPECT_EQ(h.call(1, {"RELEASE", "g/b", "2", kOwner}, at(2)), kOne);
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/c", "x", "1000"}, at(2)), grant(3));
}

TEST(DispatcherLimitsTest, KeyLimitCountsOnlyLeasesThatAreStillRunning) {
  Harness h(config(Limits{.max_keys = 1}));
  h.open({1, 2});
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/a", "x", "100"}, at(0)), grant(1));
  // g/a's lease ran out at 100, though nothing applied the time since.
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/b", "x", "100"}, at(150)), grant(2));
}

TEST(DispatcherLimitsTest, WaiterLimitRefusesTheNextWaiterButNotATry) {
  Harness h(config(Limits{.max_waiters_per_key = 2}));
  h.open({1, 2, 3, 4, 99});
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "x", "1000"}, at(0)), grant(1));
  h.park(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0));
  h.park(3, {"ACQUIRE", "g/k", "x", "1000", "WAIT", "500"}, at(0));
  const std::string before = h.inspect("g/k", at(1));
  EXPECT_EQ(h.call(4, {"ACQUIRE", "g/k", "x", "1000", "WAIT", "500"}, at(1)),
            "-LIMIT too many waiters on this key\r\n");
  EXPECT_EQ(h.call(4, {"ACQUIRE", "g/k", "s", "1000", "FOREVER"}, at(1)),
            "-LIMIT too many waiters on this key\r\n");
  EXPECT_EQ(h.call(4, {"ACQUIRE", "g/k", "x", "1000"}, at(1)), kNil);
  EXPECT_EQ(h.inspect("g/k", at(1)), before);
  EXPECT_EQ(h.d.stats().parked, 2u);
  // Other keys are not affected, and the refusals spent no token.
  EXPECT_EQ(h.call(4, {"ACQUIRE", "g/j", "x", "1000", "FOREVER"}, at(1)), grant(2));
  h.park(1, {"ACQUIRE", "g/j", "x", "1000", "FOREVER"}, at(1));
  EXPECT_EQ(h.d.stats().parked, 3u);
}

// --- the grant guard: restart embargo and durable holds

TEST(DispatcherGuardTest, EmbargoAnswersStartingAndGrantsNothing) {
  StubGuard guard;
  guard.embargo = 250;
  Harness h(config(), &guard);
  h.open({1, 2});
  const std::string starting = "-STARTING restarted recently; no grants for another 250 ms\r\n";
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "x", "1000"}, at(0)), starting);
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(0)), starting);
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "s", "1000", "WAIT", "5000", "UNFAIR"}, at(0)), starting);
  EXPECT_TRUE(h.d.table().empty());
  EXPECT_EQ(h.d.stats().parked, 0u);
  EXPECT_TRUE(guard.holds.empty());
  // Everything else works meanwhile.
  EXPECT_EQ(h.call(1, {"PING"}, at(0)), "+PONG\r\n");
  EXPECT_EQ(h.call(1, {"RELEASE", "g/k", "1", kOwner}, at(0)), kZero);
  EXPECT_EQ(h.call(1, {"CHECK", "g/k", "x", "1"}, at(0)), kZero);
  // Once it ends, the first grant gets the first token: none was spent before.
  guard.embargo = 0;
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/k", "x", "1000"}, at(250)), grant(1));
}

TEST(DispatcherGuardTest, EveryGrantableRequestIsNotedWithItsTtlPlusDelayFirst) {
  StubGuard guard;
  Harness h(config(), &guard);
  h.open({1, 2});
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "x", "1000", "DELAY", "500"}, at(0)), grant(1));
  EXPECT_EQ(guard.holds, (std::vector<std::int64_t>{1500}));
  // A queued request is granted later without another word: it is noted now.
  h.park(2, {"ACQUIRE", "g/k", "x", "7000", "FOREVER"}, at(0));
  EXPECT_EQ(guard.longest_hold(), 7000);
}

TEST(DispatcherGuardTest, RenewNotesItsTtlPlusTheGrantsLockDelay) {
  // durable_tokens.h: note_hold before a renewal with "its ttl + the grant's lock_delay".
  // After a crash right after this renewal the lease runs to 3000 ms and its lock-delay
  // to 3500 ms, so the restarted server must embargo grants for 3500 ms.
  StubGuard guard;
  Harness h(config(), &guard);
  h.open({1});
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "x", "1000", "DELAY", "500"}, at(0)), grant(1));
  EXPECT_EQ(h.call(1, {"RENEW", "g/k", "1", kOwner, "3000"}, at(10)), kOne);
  EXPECT_GE(guard.longest_hold(), 3500);
}

TEST(DispatcherGuardTest, FailureToMakeAHoldDurableIsAnErrorAndGrantsOrQueuesNothing) {
  StubGuard guard;
  Harness h(config(), &guard);
  h.open({1, 2, 99});
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "x", "1000"}, at(0)), grant(1));
  guard.fail = true;
  const std::string error = "-ERR unavailable: cannot store the state (injected)\r\n";
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/j", "x", "1000"}, at(1)), error);
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(1)), error);
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/k", "s", "1000", "WAIT", "100"}, at(1)), error);
  EXPECT_EQ(h.call(1, {"RENEW", "g/k", "1", kOwner, "5000"}, at(500)), error);
  EXPECT_EQ(h.d.table().stats().keys, 1u);
  EXPECT_EQ(h.d.table().stats().holders, 1u);
  EXPECT_EQ(h.d.table().stats().waiters, 0u);
  EXPECT_EQ(h.d.stats().parked, 0u);
  EXPECT_EQ(h.d.stats().errors, 4u);
  // The renewal did not happen: the lease still ends at 1000.
  EXPECT_EQ(h.inspect("g/k", at(500)), inspect_reply({{"exclusive", 1, 500}}, {}));
  guard.fail = false;
  EXPECT_EQ(h.call(2, {"ACQUIRE", "g/j", "x", "1000"}, at(600)), grant(2));
}

// --- AUTH

TEST(DispatcherAuthTest, PasswordIsRequiredBeforeAnythingElse) {
  Harness h(config({}, "s3cret"));
  h.open({1, 2});
  const std::string noauth = "-NOAUTH authentication required\r\n";
  EXPECT_EQ(h.call(1, {"PING"}, at(0)), noauth);
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "x", "1000"}, at(0)), noauth);
  EXPECT_EQ(h.call(1, {"RELEASE", "g/k", "1", kOwner}, at(0)), noauth);
  EXPECT_EQ(h.call(1, {"INFO"}, at(0)), noauth);
  EXPECT_EQ(h.call(1, {"HELLO"}, at(0)), noauth);
  EXPECT_EQ(h.call(1, {"NOSUCHCOMMAND"}, at(0)), noauth);
  EXPECT_TRUE(h.d.table().empty());

  EXPECT_EQ(h.call(1, {"AUTH", "secret"}, at(0)), "-WRONGPASS invalid password\r\n");
  EXPECT_EQ(h.call(1, {"AUTH", ""}, at(0)), "-WRONGPASS invalid password\r\n");
  EXPECT_EQ(h.call(1, {"PING"}, at(0)), noauth);
  EXPECT_EQ(h.call(1, {"AUTH", "s3cret"}, at(0)), kOk);
  EXPECT_EQ(h.call(1, {"PING"}, at(0)), "+PONG\r\n");
  EXPECT_EQ(h.call(1, {"ACQUIRE", "g/k", "x", "1000"}, at(0)), grant(1));
  // Authentication belongs to the connection; Redis 6 clients send a user name too.
  EXPECT_EQ(h.call(2, {"PING"}, at(0)), noauth);
  EXPECT_EQ(h.call(2, {"AUTH", "default", "s3cret"}, at(0)), kOk);
  EXPECT_EQ(h.call(2, {"RELEASE", "g/k", "1", kOwner}, at(0)), kOne);
}

TEST(DispatcherAuthTest, QuitNeedsNoPassword) {
  Harness h(config({}, "s3cret"));
  h.open({1});
  std::string reply;
  EXPECT_EQ(h.execute(1, {"QUIT"}, at(0), reply), Outcome::close);
  EXPECT_EQ(reply, kOk);
}

TEST_F(DispatcherTest, AuthWithoutAServerPasswordIsAnError) {
  EXPECT_EQ(call(1, {"AUTH", "x"}), "-ERR no password is set on this server\r\n");
  EXPECT_EQ(call(1, {"PING"}), "+PONG\r\n");
}

// --- INFO, INSPECT, HELLO

TEST_F(DispatcherTest, HelloDescribesTheServer) {
  const std::string caps =
      "shared fair unfair lock-delay fencing durable-tokens check semaphore multi election "
      "watch cache waits";
  EXPECT_EQ(call(1, {"HELLO"}),
            "*8\r\n$6\r\nserver\r\n$7\r\nwardend\r\n$7\r\nversion\r\n"
            "$5\r\n9.9.9\r\n$5\r\nproto\r\n:8\r\n$12\r\ncapabilities\r\n" +
                bulk(caps));
}

// --- WATCH: pushed changes of a key's holders

const std::string kChangedE = "*2\r\n$7\r\nCHANGED\r\n$3\r\ng/e\r\n";

TEST_F(DispatcherTest, AWatcherIsPushedEveryChangeOfTheKeysHoldersAndNothingElse) {
  EXPECT_EQ(call(4, {"WATCH", "g/e"}), "+OK\r\n");
  EXPECT_EQ(h_.wakeups(), Wakeups{});
  // A grant.
  EXPECT_EQ(call(1, {"ACQUIRE", "g/e", "x", "1000", "VALUE", "a"}, at(0)), grant(1));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{4, kChangedE}}));
  // Another key, a renewal and a waiter that parks change nothing the watcher sees.
  EXPECT_EQ(call(1, {"ACQUIRE", "g/other", "x", "1000"}, at(0)), grant(2));
  EXPECT_EQ(call(1, {"RENEW", "g/e", "1", kOwner, "1000"}, at(10)), kOne);
  h_.park(2, {"ACQUIRE", "g/e", "x", "1000", "FOREVER", "VALUE", "b"}, at(10));
  EXPECT_EQ(h_.wakeups(), Wakeups{});
  // A proclaim.
  EXPECT_EQ(call(1, {"PROCLAIM", "g/e", "1", kOwner, "a2"}, at(20)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{4, kChangedE}}));
  // A release that grants the waiter: one push for both.
  EXPECT_EQ(call(1, {"RELEASE", "g/e", "1", kOwner}, at(30)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{4, kChangedE}, {2, grant(3, 20'000)}}));
  // An expiry.
  h_.d.advance(at(30 + 1000));
  EXPECT_EQ(h_.wakeups(), (Wakeups{{4, kChangedE}}));
}

TEST_F(DispatcherTest, AWatchingConnectionTakesOnlyPingAndQuitAndItsCloseEndsTheWatch) {
  EXPECT_EQ(call(4, {"WATCH", "bad key"}).substr(0, 8), "-INVALID");
  EXPECT_EQ(call(4, {"WATCH", "g/e"}), "+OK\r\n");
  EXPECT_EQ(call(4, {"PING"}), "+PONG\r\n");
  EXPECT_EQ(call(4, {"WATCH", "g/f"}), "-ERR a watching connection takes only PING and QUIT\r\n");
  EXPECT_EQ(call(4, {"ACQUIRE", "g/e", "x", "1000"}),
            "-ERR a watching connection takes only PING and QUIT\r\n");
  EXPECT_TRUE(h_.d.table().empty()) << "the refused ACQUIRE took nothing";
  h_.d.disconnect(4, at(0));
  EXPECT_EQ(call(1, {"ACQUIRE", "g/e", "x", "1000"}, at(0)), grant(1));
  EXPECT_EQ(h_.wakeups(), Wakeups{}) << "nobody watches any more";
}

// --- elections: ACQUIRE ... VALUE, PROCLAIM, INSPECT "values"

TEST_F(DispatcherTest, ACampaignsValueIsShownWithItsGrantAndProclaimReplacesIt) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/e", "x", "1000", "VALUE", "node-a"}, at(0)), grant(1));
  h_.park(2, {"ACQUIRE", "g/e", "x", "1000", "FOREVER", "VALUE", "node-b"}, at(0));
  const std::string rows = "*1\r\n*3\r\n$9\r\nexclusive\r\n:1\r\n:900\r\n";
  const std::string waiters = "$7\r\nwaiters\r\n*1\r\n*2\r\n$9\r\nexclusive\r\n:-1\r\n";
  EXPECT_EQ(h_.inspect("g/e", at(100)), "*8\r\n$7\r\nholders\r\n" + rows + waiters +
                                            "$10\r\ndelayed_ms\r\n:0\r\n$6\r\nvalues\r\n*1\r\n" +
                                            bulk("node-a"));
  EXPECT_EQ(call(3, {"PROCLAIM", "g/e", "1", kOwner, "node-a:8080"}, at(100)), kOne);
  EXPECT_EQ(h_.inspect("g/e", at(100)), "*8\r\n$7\r\nholders\r\n" + rows + waiters +
                                            "$10\r\ndelayed_ms\r\n:0\r\n$6\r\nvalues\r\n*1\r\n" +
                                            bulk("node-a:8080"));
  // The waiter's value comes with its grant.
  EXPECT_EQ(call(1, {"RELEASE", "g/e", "1", kOwner}, at(200)), kOne);
  EXPECT_EQ(h_.wakeups(), (Wakeups{{2, grant(2, 200'000)}}));
  EXPECT_EQ(h_.inspect("g/e", at(200)),
            "*8\r\n$7\r\nholders\r\n*1\r\n*3\r\n$9\r\nexclusive\r\n:2\r\n:1000\r\n"
            "$7\r\nwaiters\r\n*0\r\n$10\r\ndelayed_ms\r\n:0\r\n$6\r\nvalues\r\n*1\r\n" +
                bulk("node-b"));
  // An empty value leaves a plain lock's reply.
  EXPECT_EQ(call(2, {"PROCLAIM", "g/e", "2", kOwner, ""}, at(300)), kOne);
  EXPECT_EQ(h_.inspect("g/e", at(300)), inspect_reply({{"exclusive", 2, 900}}, {}));
}

TEST_F(DispatcherTest, ProclaimWithoutTheOwnersSecretOrAHeldGrantIsNotHeldAndChangesNothing) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/e", "x", "1000", "VALUE", "node-a"}, at(0)), grant(1));
  std::string wrong = h_.secrets.at("1");
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  const std::string before = h_.inspect("g/e", at(1));
  EXPECT_EQ(call(2, {"PROCLAIM", "g/e", "1", wrong, "impostor"}, at(1)), kZero);
  EXPECT_EQ(call(2, {"PROCLAIM", "g/e", "2", kOwner, "impostor"}, at(1)), kZero);
  EXPECT_EQ(call(2, {"PROCLAIM", "g/other", "1", kOwner, "impostor"}, at(1)), kZero);
  EXPECT_EQ(h_.inspect("g/e", at(1)), before);
  EXPECT_EQ(call(1, {"RELEASE", "g/e", "1", kOwner}, at(2)), kOne);
  EXPECT_EQ(call(1, {"PROCLAIM", "g/e", "1", kOwner, "late"}, at(3)), kZero);
  EXPECT_TRUE(h_.d.table().empty());
}

TEST_F(DispatcherTest, AValueOnAnythingButAnExclusiveLockOrTooLongIsInvalid) {
  const std::string too_long(kMaxLeaderValueBytes + 1, 'v');
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"ACQUIRE", "g/e", "s", "1000", "VALUE", "v"},
           {"ACQUIRE", "g/e", "s", "1000", "PERMITS", "1", "2", "VALUE", "v"},
           {"ACQUIRE", "g/e", "x", "1000", "VALUE", too_long}}) {
    EXPECT_TRUE(call(1, args, at(0)).starts_with("-INVALID ")) << args[4];
  }
  EXPECT_TRUE(h_.d.table().empty());
  EXPECT_EQ(
      call(1, {"ACQUIRE", "g/e", "x", "1000", "VALUE", std::string(kMaxLeaderValueBytes, 'v')},
           at(0)),
      grant(1));
  EXPECT_TRUE(call(1, {"PROCLAIM", "g/e", "1", kOwner, too_long}, at(1)).starts_with("-INVALID "));
  EXPECT_TRUE(call(1, {"PROCLAIM", "g/e", "1", kOwner}, at(1)).starts_with("-ERR "));
}

TEST_F(DispatcherTest, InspectShowsHoldersWaitersAndLockDelay) {
  EXPECT_EQ(h_.inspect("g/k", at(0)),
            "*6\r\n$7\r\nholders\r\n*0\r\n$7\r\nwaiters\r\n*0\r\n$10\r\ndelayed_ms\r\n:0\r\n");
  EXPECT_EQ(call(1, {"ACQUIRE", "g/k", "x", "1000"}, at(0)), grant(1));
  h_.park(2, {"ACQUIRE", "g/k", "s", "1000", "WAIT", "500"}, at(100));
  h_.park(3, {"ACQUIRE", "g/k", "x", "1000", "FOREVER"}, at(100));
  EXPECT_EQ(h_.inspect("g/k", at(200)),
            "*6\r\n$7\r\nholders\r\n*1\r\n*3\r\n$9\r\nexclusive\r\n:1\r\n:800\r\n"
            "$7\r\nwaiters\r\n*2\r\n*2\r\n$6\r\nshared\r\n:400\r\n*2\r\n$9\r\nexclusive\r\n:-1\r\n"
            "$10\r\ndelayed_ms\r\n:0\r\n");
  // Inspecting changes nothing.
  EXPECT_TRUE(h_.wakeups().empty());
  EXPECT_EQ(h_.d.table().stats().waiters, 2u);
}

TEST_F(DispatcherTest, InspectShowsASemaphoresPermits) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "2", "3"}, at(0)), grant(1));
  h_.park(2, {"ACQUIRE", "g/s", "s", "1000", "PERMITS", "3", "3", "FOREVER"}, at(0));
  EXPECT_EQ(h_.inspect("g/s", at(100)),
            "*8\r\n$7\r\nholders\r\n*1\r\n*4\r\n$6\r\nshared\r\n:1\r\n:900\r\n:2\r\n"
            "$7\r\nwaiters\r\n*1\r\n*3\r\n$6\r\nshared\r\n:-1\r\n:3\r\n"
            "$10\r\ndelayed_ms\r\n:0\r\n$7\r\npermits\r\n:3\r\n");
}

TEST_F(DispatcherTest, InfoCountsConnectionsKeysHoldersWaitersAndEvents) {
  EXPECT_EQ(call(1, {"ACQUIRE", "g/a", "x", "100"}, at(0)), grant(1));
  EXPECT_EQ(call(1, {"ACQUIRE", "g/b", "s", "1000"}, at(0)), grant(2));
  EXPECT_EQ(call(2, {"ACQUIRE", "g/b", "s", "1000"}, at(0)), grant(3));
  h_.park(3, {"ACQUIRE", "g/b", "x", "1000", "WAIT", "50"}, at(0));
  h_.park(4, {"ACQUIRE", "g/b", "x", "1000", "FOREVER"}, at(0));
  EXPECT_TRUE(call(1, {"BOGUS"}, at(0)).starts_with("-ERR"));
  h_.d.advance(at(100));  // g/a expires, the WAIT 50 timed out

  const std::string reply = call(1, {"INFO"}, at(100));
  ASSERT_TRUE(reply.starts_with("$")) << reply;
  const auto f = info_fields(reply);
  EXPECT_EQ(f.at("server"), "wardend");
  EXPECT_EQ(f.at("version"), "9.9.9");
  EXPECT_EQ(f.at("connections"), "5");
  EXPECT_EQ(f.at("keys"), "1");
  EXPECT_EQ(f.at("holders"), "2");
  EXPECT_EQ(f.at("waiters"), "1");
  EXPECT_EQ(f.at("commands"), "7");  // INFO itself included
  EXPECT_EQ(f.at("grants"), "3");
  EXPECT_EQ(f.at("timeouts"), "1");
  EXPECT_EQ(f.at("expirations"), "1");
  EXPECT_EQ(f.at("errors"), "1");
  EXPECT_TRUE(f.contains("rss_bytes"));
  EXPECT_TRUE(call(1, {"INFO", "server"}, at(100)).starts_with("$"));  // a section is accepted
}

TEST_F(DispatcherTest, InfoHasTheFieldsTheProtocolDocumentPromises) {
  // docs/protocol.md lists the INFO fields.
  EXPECT_EQ(call(1, {"ACQUIRE", "g/a", "x", "1000"}, at(0)), grant(1));
  const auto f = info_fields(call(1, {"INFO"}, at(2000)));
  for (const char* field :
       {"server", "version", "connections", "keys", "holders", "waiters", "commands", "grants",
        "timeouts", "expirations", "errors", "rss_bytes", "last_token", "uptime_ms"}) {
    EXPECT_TRUE(f.contains(field)) << "no '" << field << "' line in INFO";
  }
}

// --- stats stay consistent with the table through a busy sequence

TEST_F(DispatcherTest, StatsFollowTheTable) {
  for (int i = 0; i < 20; ++i) {
    const std::string key = "g/k" + std::to_string(i % 3);
    const ConnId conn = 1 + static_cast<ConnId>(i % 4);
    std::string reply;
    h_.execute(conn, {"ACQUIRE", key, i % 2 ? "s" : "x", "100", "UNFAIR"}, at(i * 10), reply);
  }
  h_.d.advance(at(10'000));
  const auto s = h_.d.stats();
  EXPECT_EQ(s.table.keys, 0u);
  EXPECT_EQ(s.table.holders, 0u);
  EXPECT_EQ(s.grants, s.expirations);
  EXPECT_TRUE(h_.d.table().empty());
}

}  // namespace
}  // namespace warden::server
