// mysql:// elections behind the engine's back, against a real MariaDB: a campaign is the
// lock, and its value the row of warden_leaders for the lock's id, with the term that
// wrote it (docs/engines/mysql.md, Elections). The row is written by the grant's
// session in the grant's round trip and rewritten in place by proclaim while that
// session holds the lock; status believes it only for the holder's own term.
#include "warden/election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/mariadb_server.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

LockOptions long_lease() {
  LockOptions options;
  options.ttl = 60s;
  return options;
}

// "TOKEN:HEX(VALUE)" of the lock's warden_leaders row, or "none".
std::string leaders_row(MariaDbServer& server, const std::string& name) {
  const auto id = server.lock_id("g", name);
  if (!id) return "none";
  return server
      .scalar("SELECT CONCAT(token, ':', HEX(value)) FROM warden.warden_leaders WHERE id = " +
              std::to_string(*id))
      .value_or("none");
}

std::string hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : bytes) {
    out += kHex[static_cast<unsigned char>(c) >> 4];
    out += kHex[static_cast<unsigned char>(c) & 0xF];
  }
  return out;
}

TEST(MysqlElection, TheValueIsTheLeadersRowOfItsTermAndProclaimRewritesItInPlace) {
  MariaDbServer server;
  Client client = Client::open(server.uri());
  Client other = Client::open(server.uri());
  Leadership leading =
      client.election("g", "e", long_lease()).campaign("node-a:8080", Wait::none());
  ASSERT_TRUE(leading);
  const std::string term = std::to_string(leading.term());
  EXPECT_EQ(leaders_row(server, "e"), term + ":" + hex("node-a:8080"));

  leading.proclaim("node-a:9090");
  EXPECT_EQ(leaders_row(server, "e"), term + ":" + hex("node-a:9090"));
  const std::string binary("\0'\"\\\n\xff", 6);
  leading.proclaim(binary);
  EXPECT_EQ(leaders_row(server, "e"), term + ":" + hex(binary));
  EXPECT_EQ(other.election("g", "e").leader(), (Leader{binary, leading.term()}));
  const std::string largest(kMaxLeaderValueBytes, '\x7f');
  leading.proclaim(largest);
  EXPECT_EQ(other.election("g", "e").leader(), (Leader{largest, leading.term()}));
  EXPECT_EQ(server.scalar("SELECT COUNT(*) FROM warden.warden_leaders"), "1")
      << "one row per election, rewritten";

  leading.resign();
  EXPECT_EQ(other.election("g", "e").leader(), std::nullopt);
  // The row of the term that ended stays, and is not believed for the next holder: a
  // lock's holder shows no value.
  Lease lock = other.lock("g", "e", long_lease()).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lock);
  EXPECT_EQ(other.election("g", "e").leader(), (Leader{"", lock.token()}));
}

TEST(MysqlElection, ALeaderWhoseSessionWasKilledCannotProclaimAndChangesNothing) {
  MariaDbServer server;
  ClientOptions no_renewals;
  no_renewals.watchdog = false;
  Client old_client = Client::open(server.uri(), no_renewals);
  Client next_client = Client::open(server.uri());
  Leadership old = old_client.election("g", "e", long_lease()).campaign("old", Wait::none());
  ASSERT_TRUE(old);
  server.query("KILL CONNECTION " + std::to_string(*server.holder_session("g", "e")));
  Leadership next = next_client.election("g", "e", long_lease()).campaign("new", Wait::up_to(10s));
  ASSERT_TRUE(next);
  try {
    old.proclaim("still here?");
    ADD_FAILURE() << "a leader whose session was killed proclaimed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::lost) << e.what();
  }
  EXPECT_EQ(leaders_row(server, "e"), std::to_string(next.term()) + ":" + hex("new"));
}

// Leaders follow each other as fast as they can while another client reads the leader
// over and over: every leader it sees carries the value of its own term, never the
// previous leader's and never none. (Without the leader mark, status shows a new term
// with no value in about one run in four.)
TEST(MysqlElection, AReaderNeverSeesANewTermWithAnotherTermsValue) {
  MariaDbServer server;
  Client a = Client::open(server.uri());
  Client b = Client::open(server.uri());
  Client reader = Client::open(server.uri());
  std::mutex mu;
  std::map<std::uint64_t, std::string> values;  // term → the value campaigned with
  std::vector<Leader> seen;
  std::atomic<bool> done{false};
  std::atomic<int> looks{0};  // leaders the reader saw
  std::thread watcher([&] {
    Election election = reader.election("g", "e");
    while (!done) {
      if (auto leader = election.leader()) {
        seen.push_back(*leader);
        ++looks;
      }
    }
  });
  // Until the reader saw a good many leaders (it starts when its thread does). Every
  // other leader stays until the reader has looked once more: a status read takes a few
  // statements, and on a loaded machine leaders that never wait came and went between
  // the reader's looks so fast that it saw 14 in 5,000 terms. The leaders in between
  // resign at once, so the reader still meets terms that change under its reads.
  for (int i = 0; looks < 200 && i < 5000; ++i) {
    Client& client = i % 2 == 0 ? a : b;
    const std::string value = "candidate-" + std::to_string(i);
    Leadership leading = client.election("g", "e", long_lease()).campaign(value, Wait::up_to(10s));
    if (!leading) {
      ADD_FAILURE() << "campaign " << i << " was not granted";
      break;
    }
    {
      std::lock_guard lock(mu);
      values[leading.term()] = value;
    }
    if (i % 2 == 0) {
      const int before = looks;
      const auto until = std::chrono::steady_clock::now() + 1s;
      while (looks == before && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(1ms);
      }
    }
    leading.resign();
  }
  done = true;
  watcher.join();
  EXPECT_GE(looks.load(), 200) << "the reader saw too few leaders to judge";
  for (const Leader& leader : seen) {
    const auto it = values.find(leader.term);
    ASSERT_NE(it, values.end()) << "term " << leader.term << " was never a leader's";
    EXPECT_EQ(leader.value, it->second) << "term " << leader.term;
  }
}

}  // namespace
}  // namespace warden::testing
