// tests/server/dispatcher_restart_test.cc — the dispatcher's part in a planned restart,
// with fake time and no sockets: waiters dropped without granting anything, the table
// and its owner secrets out, and back into a new dispatcher whose grants work from any
// connection.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dispatcher_test_support.h"
#include "server/dispatcher.h"

namespace warden::server {
namespace {

using std::chrono::milliseconds;

DispatcherConfig config() { return DispatcherConfig{Limits{}, "", "9.9.9", Time{}}; }

std::string call(Dispatcher& d, ConnId conn, std::vector<std::string> args, Time now) {
  std::vector<std::string_view> views(args.begin(), args.end());
  std::string reply;
  d.execute(conn, views, now, reply);
  return reply;
}

struct Granted {
  std::string token;
  std::string secret;
};

// A grant reply "*3\r\n:<token>\r\n:<us>\r\n$32\r\n<secret>\r\n"; empty for anything else.
Granted granted(const std::string& reply) {
  if (!reply.starts_with("*3\r\n:")) return {};
  const auto end = reply.find("\r\n", 5);
  const auto at = reply.find("$32\r\n");
  return Granted{reply.substr(5, end - 5), reply.substr(at + 5, 32)};
}

// `snapshot` through the file's encoding, as a restart reads it (the server adds the
// state record), and restored into a new dispatcher drawing tokens after `before`'s.
struct Restarted {
  table::CountingTokenSource tokens;
  Dispatcher dispatcher;
  std::size_t restored = 0;
  Restarted(TableSnapshot snapshot, const table::CountingTokenSource& before)
      : tokens(before.last()), dispatcher(config(), &tokens, nullptr) {
    snapshot.state = StateRecord{.reserved_upto = before.last(), .max_hold_ms = 60'000};
    restored =
        dispatcher.restore(decode_table_snapshot(encode_table_snapshot(snapshot), "t"), at(0));
  }
};

TEST(DispatcherRestartTest, DroppingWaitersGrantsNothingAndAnswersNobody) {
  Dispatcher d(config(), nullptr, nullptr);
  for (ConnId c : {1, 2, 3}) ASSERT_TRUE(d.connect(c));
  const Granted s = granted(call(d, 1, {"ACQUIRE", "g/k", "s", "10000"}, at(0)));
  ASSERT_FALSE(s.token.empty());
  std::string reply;
  // An exclusive waiter at the head, a shared one behind it: removing the head first
  // would grant the shared one.
  const std::vector<std::string> x = {"ACQUIRE", "g/k", "x", "10000", "FOREVER"};
  const std::vector<std::string> sh = {"ACQUIRE", "g/k", "s", "10000", "FOREVER"};
  std::vector<std::string_view> xv(x.begin(), x.end());
  std::vector<std::string_view> sv(sh.begin(), sh.end());
  ASSERT_EQ(d.execute(2, xv, at(1), reply), Dispatcher::Outcome::parked);
  ASSERT_EQ(d.execute(3, sv, at(2), reply), Dispatcher::Outcome::parked);

  d.drop_waiters(at(3));
  EXPECT_TRUE(d.take_wakeups().empty());
  const auto info = d.table().inspect("g/k");
  EXPECT_EQ(info.holders.size(), 1u);
  EXPECT_TRUE(info.waiters.empty());
  EXPECT_EQ(d.stats().parked, 0u);
}

TEST(DispatcherRestartTest, SnapshotRestoredIntoANewDispatcherKeepsTokensSecretsAndDelays) {
  table::CountingTokenSource before_tokens;
  Dispatcher before(config(), &before_tokens, nullptr);
  ASSERT_TRUE(before.connect(1));
  const Granted held = granted(call(before, 1, {"ACQUIRE", "g/held", "x", "1000"}, at(0)));
  ASSERT_EQ(call(before, 1, {"RENEW", "g/held", held.token, held.secret, "4000"}, at(500)),
            ":1\r\n");
  const Granted r1 = granted(call(before, 1, {"ACQUIRE", "g/read", "s", "2000"}, at(600)));
  const Granted r2 = granted(call(before, 1, {"ACQUIRE", "g/read", "s", "2000"}, at(600)));
  ASSERT_FALSE(r2.token.empty());
  ASSERT_FALSE(granted(call(before, 1, {"ACQUIRE", "g/dead", "x", "100", "DELAY", "3000"}, at(600)))
                   .token.empty());

  const TableSnapshot snap = before.snapshot(at(1000));  // g/dead expired at 700
  ASSERT_EQ(snap.holders.size(), 3u);
  EXPECT_EQ(snap.holders[0].key, "g/held");
  EXPECT_EQ(snap.holders[0].ttl_ms, 4000u);  // the renewal's ttl, not the first one's
  ASSERT_EQ(snap.delays.size(), 1u);
  EXPECT_EQ(snap.delays[0].key, "g/dead");
  EXPECT_EQ(snap.delays[0].left_ms, 2700u);

  // The next run: its token source continues above everything handed out before.
  table::CountingTokenSource after_tokens(before_tokens.last());
  Dispatcher after(config(), &after_tokens, nullptr);
  EXPECT_EQ(after.restore(snap, at(0)), 3u);
  ASSERT_TRUE(after.connect(7));  // a connection that did not exist before
  EXPECT_EQ(call(after, 7, {"ACQUIRE", "g/held", "x", "1000"}, at(10)), kNil);
  EXPECT_EQ(call(after, 7, {"RENEW", "g/held", held.token, std::string(32, '0'), "1000"}, at(10)),
            ":0\r\n");
  EXPECT_EQ(call(after, 7, {"RENEW", "g/held", held.token, held.secret, "1000"}, at(10)), ":1\r\n");
  EXPECT_EQ(call(after, 7, {"RELEASE", "g/read", r1.token, r1.secret}, at(20)), ":1\r\n");
  EXPECT_EQ(call(after, 7, {"RELEASE", "g/read", r2.token, r2.secret}, at(20)), ":1\r\n");
  // The lock-delay runs its 2,700 ms again from the restart.
  EXPECT_EQ(call(after, 7, {"ACQUIRE", "g/dead", "x", "1000"}, at(2699)), kNil);
  const Granted fresh = granted(call(after, 7, {"ACQUIRE", "g/dead", "x", "1000"}, at(2700)));
  ASSERT_FALSE(fresh.token.empty());
  EXPECT_GT(std::stoull(fresh.token), before_tokens.last());
}

TEST(DispatcherRestartTest, SemaphoreKeepsItsPermitsAndItsNumberAcrossARestart) {
  table::CountingTokenSource before_tokens;
  Dispatcher before(config(), &before_tokens, nullptr);
  ASSERT_TRUE(before.connect(1));
  const std::vector<std::string> two_of_three = {"ACQUIRE", "g/sem", "s", "5000",
                                                 "PERMITS", "2",     "3"};
  const Granted a = granted(call(before, 1, two_of_three, at(0)));
  ASSERT_FALSE(a.token.empty());
  const TableSnapshot snap = before.snapshot(at(10));
  ASSERT_EQ(snap.holders.size(), 1u);
  EXPECT_EQ(snap.holders[0].capacity, 3u);
  EXPECT_EQ(snap.holders[0].permits, 2u);
  Restarted restarted(snap, before_tokens);
  Dispatcher& after = restarted.dispatcher;
  EXPECT_EQ(restarted.restored, 1u);
  ASSERT_TRUE(after.connect(7));
  EXPECT_EQ(call(after, 7, two_of_three, at(10)), kNil) << "2 held + 2 > 3";
  EXPECT_TRUE(call(after, 7, {"ACQUIRE", "g/sem", "s", "5000", "PERMITS", "1", "4"}, at(10))
                  .starts_with("-INVALID"))
      << "the restored semaphore keeps its number of permits";
  EXPECT_FALSE(
      granted(call(after, 7, {"ACQUIRE", "g/sem", "s", "5000", "PERMITS", "1", "3"}, at(10)))
          .token.empty());
  EXPECT_EQ(call(after, 7, {"RELEASE", "g/sem", a.token, a.secret}, at(20)), ":1\r\n");
}

TEST(DispatcherRestartTest, ALeaderKeepsItsValueAcrossARestart) {
  table::CountingTokenSource before_tokens;
  Dispatcher before(config(), &before_tokens, nullptr);
  ASSERT_TRUE(before.connect(1));
  const Granted a =
      granted(call(before, 1, {"ACQUIRE", "g/leader", "x", "5000", "VALUE", "node-a"}, at(0)));
  ASSERT_FALSE(a.token.empty());
  EXPECT_EQ(call(before, 1, {"PROCLAIM", "g/leader", a.token, a.secret, "node-a:8080"}, at(1)),
            ":1\r\n");
  const TableSnapshot snap = before.snapshot(at(10));
  ASSERT_EQ(snap.holders.size(), 1u);
  EXPECT_EQ(snap.holders[0].value, "node-a:8080");
  Restarted restarted(snap, before_tokens);
  Dispatcher& after = restarted.dispatcher;
  EXPECT_EQ(restarted.restored, 1u);
  ASSERT_TRUE(after.connect(7));
  EXPECT_TRUE(call(after, 7, {"INSPECT", "g/leader"}, at(10))
                  .ends_with("$6\r\nvalues\r\n*1\r\n$11\r\nnode-a:8080\r\n"))
      << "the restored leader lost its value";
  EXPECT_EQ(call(after, 7, {"PROCLAIM", "g/leader", a.token, a.secret, "node-a:9090"}, at(20)),
            ":1\r\n")
      << "the restored leader can still proclaim with its secret";
}

}  // namespace
}  // namespace warden::server
