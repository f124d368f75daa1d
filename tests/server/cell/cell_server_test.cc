// tests/server/cell/cell_server_test.cc — wardend cells of three real processes on
// loopback: followers send clients to the leader; a grant survives its leader's kill -9,
// a frozen leader and a restart of every member, with its token and owner secret; a
// waiter asks again at the new leader; tokens never go back; a frozen leader's replies
// never arrive once another leads.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "support/server_process.h"
#include "support/text_client.h"
#include "support/wardend_cell.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Asks `key` of `port` until `part` is in its INSPECT reply (false after 30 s).
bool inspect_shows(std::uint16_t port, const std::string& key, const std::string& part) {
  TextClient c(port);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (contains(c({"INSPECT", key}), part)) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

std::size_t other_than(std::size_t a, std::size_t b = 99) {
  for (std::size_t i = 0;; ++i) {
    if (i != a && i != b) return i;
  }
}

TEST(WardendCell, FollowersSendClientsToTheLeaderAndGrantNothing) {
  WardendCell cell;
  const std::size_t leader = cell.wait_for_leader();
  const std::size_t follower = other_than(leader);
  TextClient f(cell.port(follower));
  const std::string moved = "-MOVED 127.0.0.1:" + std::to_string(cell.port(leader));
  EXPECT_EQ(f({"ACQUIRE", "t/lock", "x", "60000"}), moved);
  EXPECT_EQ(f({"INFO"}), moved);
  EXPECT_EQ(f({"PING"}), "+PONG");

  TextClient l(cell.port(leader));
  const Grant g = grant_of(l({"ACQUIRE", "t/lock", "x", "60000"}));
  EXPECT_NE(g.token, 0u) << "the follower's ACQUIRE took the lock";
  EXPECT_EQ(f({"RELEASE", "t/lock", std::to_string(g.token), g.secret}), moved);
  EXPECT_EQ(l({"RELEASE", "t/lock", std::to_string(g.token), g.secret}), ":1");
}

TEST(WardendCell, AGrantOutlivesItsLeadersKillWithItsTokenAndOwnerSecret) {
  WardendCell cell;
  const std::size_t leader = cell.wait_for_leader();
  Grant held;
  Grant shared1;
  Grant shared2;
  {
    TextClient c(cell.port(leader));
    held = grant_of(c({"ACQUIRE", "t/held", "x", "60000"}));
    shared1 = grant_of(c({"ACQUIRE", "t/shared", "s", "60000"}));
    shared2 = grant_of(c({"ACQUIRE", "t/shared", "s", "60000"}));
    ASSERT_NE(held.token, 0u);
    ASSERT_NE(shared2.token, 0u);
    // A lease that runs out starts its lock-delay: that is held by the cell too.
    ASSERT_NE(grant_of(c({"ACQUIRE", "t/crashed", "x", "10", "DELAY", "60000"})).token, 0u);
    ASSERT_TRUE(inspect_shows(cell.port(leader), "t/crashed", "$holders, []"));
  }
  cell.process(leader).kill9();
  const std::size_t next = cell.wait_for_leader();
  ASSERT_NE(next, leader);

  TextClient other(cell.port(next));
  // Nobody else gets the locks held, or the one under its lock-delay.
  EXPECT_EQ(other({"ACQUIRE", "t/held", "x", "5000"}), "(nil)");
  EXPECT_EQ(other({"ACQUIRE", "t/shared", "x", "5000"}), "(nil)");
  EXPECT_EQ(other({"ACQUIRE", "t/crashed", "x", "5000"}), "(nil)");
  // Nor renews or releases them without the owner secret.
  EXPECT_EQ(renew(other, "t/held", Grant{held.token, std::string(32, '0')}, "5000"), ":0");
  EXPECT_EQ(release(other, "t/held", Grant{held.token, std::string(32, 'f')}), ":0");
  // The holders renew and release with the token and secret the old leader gave.
  TextClient holder(cell.port(next));
  EXPECT_EQ(renew(holder, "t/held", held, "60000"), ":1");
  EXPECT_EQ(release(holder, "t/shared", shared1), ":1");
  EXPECT_EQ(release(holder, "t/shared", shared2), ":1");
  EXPECT_EQ(release(holder, "t/held", held), ":1");
  const Grant after = grant_of(other({"ACQUIRE", "t/held", "x", "5000"}));
  EXPECT_GT(after.token, shared2.token) << "a token went back across the failover";
}

TEST(WardendCell, AWaiterWhoseLeaderIsKilledAsksAgainAndIsGrantedAtTheNewOne) {
  WardendCell cell;
  const std::size_t leader = cell.wait_for_leader();
  TextClient holder(cell.port(leader));
  const Grant h = grant_of(holder({"ACQUIRE", "t/queue", "x", "60000"}));
  ASSERT_NE(h.token, 0u);
  TextClient waiter(cell.port(leader), 60);
  waiter.send({"ACQUIRE", "t/queue", "x", "60000", "WAIT", "60000"});
  ASSERT_TRUE(inspect_shows(cell.port(leader), "t/queue", "$waiters, [["));

  cell.process(leader).kill9();
  // The wait ends with its connection: no grant from a leader that is gone.
  EXPECT_EQ(waiter.receive(), "<no reply>");
  const std::size_t next = cell.wait_for_leader();

  TextClient again(cell.port(next), 60);
  again.send({"ACQUIRE", "t/queue", "x", "60000", "WAIT", "60000"});
  ASSERT_TRUE(inspect_shows(cell.port(next), "t/queue", "$waiters, [["));
  TextClient holder_again(cell.port(next));
  EXPECT_EQ(release(holder_again, "t/queue", h), ":1");
  const Grant w = grant_of(again.receive());
  EXPECT_GT(w.token, h.token);
}

// What a leader could not confirm with the cell is never answered: its connections
// close, or it has learnt that it follows and sends its clients on.
bool not_an_answer(const std::string& reply) {
  return reply == "<no reply>" || reply.starts_with("-MOVED") || reply.starts_with("-TRYAGAIN");
}

TEST(WardendCell, AFrozenLeaderNeverGrantsOnceAnotherLeads) {
  WardendCell cell;
  const std::size_t frozen = cell.wait_for_leader();
  TextClient late(cell.port(frozen), 60);
  cell.process(frozen).signal(SIGSTOP);
  // Sent while it is frozen: it reads this when it thaws, still believing it leads.
  late.send({"ACQUIRE", "t/lock", "x", "60000"});

  const std::size_t next = cell.wait_for_leader(60s, frozen);
  TextClient now(cell.port(next));
  const Grant g = grant_of(now({"ACQUIRE", "t/lock", "x", "60000"}));
  ASSERT_NE(g.token, 0u);
  cell.process(frozen).signal(SIGCONT);

  const std::string answer = late.receive();
  EXPECT_TRUE(not_an_answer(answer))
      << "the frozen leader granted " << answer << " a lock another holds";
  // The thawed member may force another election (pre-vote is off): whoever leads now
  // has the grant the new leader made.
  TextClient after(cell.port(cell.wait_for_leader()));
  EXPECT_EQ(renew(after, "t/lock", g, "60000"), ":1");
}

// A read changes nothing, yet its answer waits for the cell too (an empty entry).
TEST(WardendCell, AFrozenLeaderNeverAnswersAReadOnceAnotherLeads) {
  WardendCell cell;
  const std::size_t frozen = cell.wait_for_leader();
  TextClient holder(cell.port(frozen));
  const Grant held = grant_of(holder({"ACQUIRE", "t/held", "x", "60000"}));
  ASSERT_NE(held.token, 0u);
  TextClient late(cell.port(frozen), 60);
  cell.process(frozen).signal(SIGSTOP);
  late.send({"CHECK", "t/held", "x", std::to_string(held.token)});

  const std::size_t next = cell.wait_for_leader(60s, frozen);
  TextClient now(cell.port(next));
  // t/held changes hands at the new leader.
  ASSERT_EQ(release(now, "t/held", held), ":1");
  ASSERT_NE(grant_of(now({"ACQUIRE", "t/held", "x", "60000"})).token, 0u);
  cell.process(frozen).signal(SIGCONT);

  const std::string answer = late.receive();
  EXPECT_TRUE(not_an_answer(answer))
      << "the frozen leader answered CHECK " << answer << " for a grant released since";
  // Whoever leads now (the thawed member may force another election) knows it released.
  TextClient after(cell.port(cell.wait_for_leader()));
  EXPECT_EQ(after({"CHECK", "t/held", "x", std::to_string(held.token)}), ":0");
}

TEST(WardendCell, AFollowerKilledMissesNothingAndTheCellServesMeanwhile) {
  WardendCell cell;
  const std::size_t leader = cell.wait_for_leader();
  const std::size_t down = other_than(leader);
  cell.process(down).kill9();
  TextClient c(cell.port(leader));
  const Grant g = grant_of(c({"ACQUIRE", "t/while-down", "x", "60000"}));
  ASSERT_NE(g.token, 0u) << "two of three members did not grant";
  cell.start(down);
  cell.wait_for_leader();

  // The grant made while it was down is the cell's, whichever member leads next: both
  // other members are stopped and one started again, so the returned one must take part.
  const std::size_t back = other_than(down);
  for (std::size_t i = 0; i < cell.size(); ++i) {
    if (i != down) cell.process(i).kill9();
  }
  cell.start(back);
  const std::size_t next = cell.wait_for_leader();
  TextClient n(cell.port(next));
  EXPECT_EQ(renew(n, "t/while-down", g, "60000"), ":1");
  EXPECT_EQ(n({"ACQUIRE", "t/while-down", "x", "5000"}), "(nil)");
}

TEST(WardendCell, ARestartOfEveryMemberKeepsTheGrantsAndTheTokens) {
  WardendCell cell;
  const std::size_t leader = cell.wait_for_leader();
  Grant g;
  {
    TextClient c(cell.port(leader));
    g = grant_of(c({"ACQUIRE", "t/kept", "x", "60000"}));
    ASSERT_NE(g.token, 0u);
    for (int i = 0; i < 5; ++i) {
      ASSERT_NE(grant_of(c({"ACQUIRE", "t/churn/" + std::to_string(i), "x", "10"})).token, 0u);
    }
  }
  for (std::size_t i = 0; i < cell.size(); ++i) cell.process(i).kill9();
  for (std::size_t i = 0; i < cell.size(); ++i) cell.start(i);
  const std::size_t next = cell.wait_for_leader();
  TextClient c(cell.port(next));
  EXPECT_EQ(renew(c, "t/kept", g, "60000"), ":1");
  EXPECT_EQ(c({"ACQUIRE", "t/kept", "x", "5000"}), "(nil)");
  EXPECT_GT(grant_of(c({"ACQUIRE", "t/new", "x", "5000"})).token, g.token + 5);
}

// A member's machine is lost: it is removed, a new member joins in its place, and the
// cell — the new member in it — keeps every grant when the leader is killed next.
TEST(WardendCell, AMemberIsReplacedAndTheCellKeepsItsGrants) {
  WardendCell cell;
  const std::size_t leader = cell.wait_for_leader();
  const std::size_t lost = other_than(leader);
  TextClient c(cell.port(leader), 150);
  const Grant g = grant_of(c({"ACQUIRE", "t/kept", "x", "60000"}));
  ASSERT_NE(g.token, 0u);
  cell.process(lost).kill9();
  // `wardend cell`, given a follower first: it finds the leader as a client does.
  const std::string url = "warden://127.0.0.1:" + std::to_string(cell.port(lost)) +
                          ",127.0.0.1:" + std::to_string(cell.port(other_than(leader, lost))) +
                          ",127.0.0.1:" + std::to_string(cell.port(leader));
  TempDir dir("wardend-cell-admin");
  // A connection to whoever leads now (a busy machine may see an election meanwhile).
  auto at_leader = [&] { return TextClient(cell.port(cell.wait_for_leader()), 150); };
  auto admin = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {wardend_path(), "cell"};
    argv.insert(argv.end(), args.begin(), args.end());
    ServerProcess p(argv, dir.path() / "admin.log");
    p.start();
    return p.wait_exit(150s);
  };
  ASSERT_EQ(admin({"remove", "--url", url, std::to_string(lost + 1)}), 0) << cell.logs();
  EXPECT_EQ(at_leader()({"CELL", "REMOVE", std::to_string(lost + 1)}).substr(0, 4), "-ERR")
      << "a member removed twice";

  const std::size_t joiner = cell.start_joiner();
  ASSERT_EQ(admin({"add", "--url", url, cell.spec(joiner)}), 0) << cell.logs();
  EXPECT_EQ(admin({"add", "--url", url, "5@localhost:1"}), 64);
  EXPECT_EQ(admin({"add", "--url", url, cell.spec(joiner)}), 1) << "a member added twice";
  const std::string info = at_leader()({"INFO"});
  EXPECT_TRUE(contains(info, "cell:")) << info;
  EXPECT_TRUE(contains(info, cell.spec(joiner))) << info;
  EXPECT_FALSE(contains(info, cell.spec(lost))) << info;

  // The old leader goes: the third original member and the new one elect, so the new one
  // counts, and the grant is there.
  cell.process(leader).kill9();
  const std::size_t next = cell.wait_for_leader();
  TextClient n(cell.port(next));
  EXPECT_EQ(renew(n, "t/kept", g, "60000"), ":1");
  EXPECT_EQ(n({"ACQUIRE", "t/kept", "x", "5000"}), "(nil)");
}

TEST(WardendCell, MembershipChangesAreRefusedWithTheirReason) {
  WardendCell cell(3, {"--requirepass", "s3cret"});
  const std::size_t leader = cell.wait_for_leader();
  TextClient c(cell.port(leader));
  ASSERT_EQ(c({"AUTH", "s3cret"}), "+OK");
  EXPECT_TRUE(c({"CELL", "ADD", "7@localhost:1"}).starts_with("-ERR")) << "a host name";
  EXPECT_TRUE(c({"CELL", "ADD", cell.spec(leader)}).starts_with("-ERR")) << "a member again";
  EXPECT_TRUE(c({"CELL", "REMOVE", "9"}).starts_with("-ERR")) << "no such member";
  EXPECT_TRUE(c({"CELL", "FROB"}).starts_with("-ERR"));
  TextClient anonymous(cell.port(leader));
  EXPECT_TRUE(anonymous({"CELL", "REMOVE", "2"}).starts_with("-NOPERM"));
  // A follower sends the change to the leader.
  TextClient f(cell.port(other_than(leader)));
  ASSERT_EQ(f({"AUTH", "s3cret"}), "+OK");
  EXPECT_EQ(f({"CELL", "REMOVE", "2"}), "-MOVED 127.0.0.1:" + std::to_string(cell.port(leader)));
}

TEST(WardendCell, ABadMemberListStopsTheStartWithItsReason) {
  TempDir dir("wardend-cell-bad");
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--cell", "1@localhost:7380", "--node", "1"}, "not an IPv4 address"},
      {{"--cell", "1@127.0.0.1:7380,2@127.0.0.1:7390", "--node", "3"}, "not one of the members"},
      {{"--cell", "1@127.0.0.1:7380"}, "--node"},
      {{"--cell", "1@127.0.0.1:7380", "--node", "1", "--cell-heartbeat", "2000"},
       "must be shorter than the election timeout"},
  };
  // A second wardend on a running member's data dir.
  WardendCell cell(1);
  cases.push_back(
      {{"--cell", cell.members(), "--node", "1", "--data-dir", cell.data_dir(0).string()},
       "in use by another wardend"});
  for (const auto& [args, reason] : cases) {
    std::vector<std::string> argv = {wardend_path()};
    if (std::find(args.begin(), args.end(), "--data-dir") == args.end()) {
      argv.insert(argv.end(), {"--data-dir", (dir.path() / "d").string()});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    ServerProcess p(argv, dir.path() / "log");
    p.start();
    EXPECT_NE(p.wait_exit(30s), 0) << args[1];
    EXPECT_TRUE(contains(p.log_text(), reason)) << p.log_text();
  }
}

}  // namespace
}  // namespace warden::testing
