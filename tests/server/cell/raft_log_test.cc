// server/cell/raft_log.h against the real library: three members in this process, each
// on its own thread, talking over loopback TCP on free ports, their logs in temp dirs.
// They elect one leader, apply every committed entry in the same order, refuse a
// proposal on a follower and name the leader, keep every committed entry when the
// leader stops, and replay their log when started again — entries of every length,
// which the library itself would cut from a log it loads again (the framing's reason).
#include "server/cell/raft_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/server_process.h"
#include "support/waiting.h"
#include "warden/error.h"

namespace warden::server::cell {
namespace {

using namespace std::chrono_literals;

// Records what it applied; its state is the entries in order. Every entry of these tests
// is unique, and one applied twice is kept once — as a real state machine keeps a
// request once by its id: a proposal told `lost` may be applied later, after the test
// proposed it again to the next leader.
class Recorder final : public StateMachine {
 public:
  void apply(std::string_view entry, std::uint64_t index) override {
    std::lock_guard guard(mu_);
    if (std::find(entries_.begin(), entries_.end(), entry) != entries_.end()) return;
    entries_.emplace_back(entry);
    indexes_.push_back(index);
  }
  std::string snapshot() override {
    std::lock_guard guard(mu_);
    std::string out;
    for (const std::string& e : entries_) out += std::to_string(e.size()) + ":" + e;
    return out;
  }
  void restore(std::string_view state) override {
    std::lock_guard guard(mu_);
    entries_.clear();
    while (!state.empty()) {
      const auto colon = state.find(':');
      const std::size_t n = std::stoul(std::string(state.substr(0, colon)));
      entries_.emplace_back(state.substr(colon + 1, n));
      state.remove_prefix(colon + 1 + n);
    }
  }
  std::vector<std::string> entries() const {
    std::lock_guard guard(mu_);
    return entries_;
  }
  std::vector<std::uint64_t> indexes() const {
    std::lock_guard guard(mu_);
    return indexes_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> entries_;
  std::vector<std::uint64_t> indexes_;
};

// A proposal's outcome, waited for.
struct Outcome {
  Proposed what = Proposed::lost;
  std::uint64_t index = 0;
};

Outcome propose(RaftLog& log, std::string entry) {
  auto promise = std::make_shared<std::promise<Outcome>>();
  auto future = promise->get_future();
  log.propose(std::move(entry), [promise](Proposed what, std::uint64_t index) {
    promise->set_value(Outcome{what, index});
  });
  if (future.wait_for(60s) != std::future_status::ready) {
    ADD_FAILURE() << "a proposal was not answered within 60 s";
    return {};
  }
  return future.get();
}

// Three members on free loopback ports, each with a data dir of its own (in memory:
// the library syncs every append, which a busy disk can stall for seconds).
class Cell {
 public:
  explicit Cell(int n = 3) : dir_("warden-cell", testing::TempDir::InMemory{}) {
    for (int i = 1; i <= n; ++i) {
      members_.push_back(Member{static_cast<std::uint64_t>(i),
                                "127.0.0.1:" + std::to_string(testing::free_port())});
      machines_.push_back(std::make_unique<Recorder>());
      logs_.emplace_back();
    }
    for (int i = 0; i < n; ++i) start(i);
  }

  RaftLogConfig config(int i) const {
    RaftLogConfig c;
    c.id = members_[i].id;
    c.members = members_;
    c.data_dir = dir_.path() / ("m" + std::to_string(i + 1));
    // Generous for a machine busy with other tests: a member starved of its CPU for an
    // election timeout would make the others elect again.
    c.election_timeout = 1000ms;
    c.heartbeat = 100ms;
    c.snapshot_threshold = 64;  // a few snapshots in these tests
    c.snapshot_trailing = 16;
    return c;
  }
  void start(int i) { logs_[i] = std::make_unique<RaftLog>(config(i), *machines_[i]); }
  void stop(int i) { logs_[i].reset(); }
  RaftLog* log(int i) { return logs_[i].get(); }
  Recorder& machine(int i) { return *machines_[i]; }
  const Member& member(int i) const { return members_[i]; }
  int size() const { return static_cast<int>(members_.size()); }

  // Proposes `entry` to whichever member leads until one commits it (a leader that
  // stepped down meanwhile tells `lost` or `not_leader`); the index it was committed at,
  // 0 if none did within 60 s.
  std::uint64_t commit(const std::string& entry) {
    std::uint64_t index = 0;
    testing::eventually(
        [&] {
          const int at = leader();
          if (at < 0) return false;
          const Outcome out = propose(*logs_[at], entry);
          index = out.what == Proposed::committed ? out.index : 0;
          return index != 0;
        },
        60s);
    if (index == 0) ADD_FAILURE() << entry << " was not committed within 60 s";
    return index;
  }

  // The running member that leads (its term's first entry committed), -1 if none
  // within `timeout`.
  int leader(std::chrono::seconds timeout = 60s) {
    int found = -1;
    testing::eventually(
        [&] {
          for (int i = 0; i < size(); ++i) {
            if (logs_[i] && logs_[i]->leading()) {
              found = i;
              return true;
            }
          }
          return false;
        },
        timeout);
    return found;
  }

 private:
  testing::TempDir dir_;
  std::vector<Member> members_;
  std::vector<std::unique_ptr<Recorder>> machines_;
  std::vector<std::unique_ptr<RaftLog>> logs_;
};

std::vector<std::string> numbered(int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back("entry-" + std::to_string(i));
  return out;
}

TEST(RaftLogFrame, EveryLengthIsFramedToAMultipleOfEightAndReadBack) {
  for (std::size_t n = 0; n < 40; ++n) {
    const std::string entry(n, static_cast<char>('a' + n % 26));
    const std::string framed = frame_entry(entry);
    EXPECT_EQ(framed.size() % 8, 0U) << n;
    const auto back = unframe_entry(framed);
    ASSERT_TRUE(back) << n;
    EXPECT_EQ(*back, entry);
  }
  EXPECT_FALSE(unframe_entry(""));
  EXPECT_FALSE(unframe_entry(std::string(7, '\0')));  // not a multiple of 8
  std::string lying = frame_entry("abc");
  lying[0] = 100;  // a length beyond the buffer
  EXPECT_FALSE(unframe_entry(lying));
}

TEST(RaftLog, ABadConfigurationIsRefusedBeforeAnythingStarts) {
  testing::TempDir dir("warden-cell");
  Recorder machine;
  RaftLogConfig base;
  base.id = 1;
  base.members = {{1, "127.0.0.1:" + std::to_string(testing::free_port())}};
  base.data_dir = dir.path() / "m1";
  const auto refused = [&](RaftLogConfig c, const std::string& says) {
    try {
      RaftLog log(std::move(c), machine);
      ADD_FAILURE() << "started with " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  RaftLogConfig c = base;
  c.heartbeat = c.election_timeout;
  refused(c, "must be shorter than the election timeout");
  c = base;
  c.members[0].address = "localhost:7000";
  refused(c, "is not an IPv4 address");
  c = base;
  c.members[0].address = "127.0.0.1:70000";
  refused(c, "is not an IPv4 address");
  c = base;
  c.id = 2;
  refused(c, "is not a member");
  c = base;
  c.members.push_back(c.members[0]);
  refused(c, "given twice");
  EXPECT_FALSE(std::filesystem::exists(base.data_dir)) << "a refused start made its directory";
}

TEST(RaftLog, ThreeMembersElectOneLeaderAndApplyEveryEntryInTheSameOrder) {
  Cell cell;
  ASSERT_GE(cell.leader(), 0) << "no leader within 60 s";
  for (const std::string& entry : numbered(0, 20)) ASSERT_NE(cell.commit(entry), 0U) << entry;
  for (int i = 0; i < cell.size(); ++i) {
    EXPECT_TRUE(
        testing::eventually([&] { return cell.machine(i).entries() == numbered(0, 20); }, 60s))
        << "member " << i + 1 << " applied " << cell.machine(i).entries().size();
    // Every member applied each entry at the same log position.
    EXPECT_EQ(cell.machine(i).indexes(), cell.machine(0).indexes()) << "member " << i + 1;
  }
  const auto indexes = cell.machine(0).indexes();
  EXPECT_TRUE(std::is_sorted(indexes.begin(), indexes.end()) &&
              std::adjacent_find(indexes.begin(), indexes.end()) == indexes.end());
}

TEST(RaftLog, AFollowerRefusesAProposalAndNamesTheLeader) {
  Cell cell;
  ASSERT_GE(cell.leader(), 0);
  // A member that knows another as its leader refuses (asked again should the leader
  // change in between, as it may on a busy machine).
  int asked = 0;
  ASSERT_TRUE(testing::eventually(
      [&] {
        const int leader = cell.leader();
        if (leader < 0) return false;
        const int follower = (leader + 1) % cell.size();
        const auto known = cell.log(follower)->leader();
        if (!known || known->id != cell.member(leader).id) return false;
        EXPECT_EQ(known->address, cell.member(leader).address);
        EXPECT_FALSE(cell.log(follower)->leading());
        return propose(*cell.log(follower), "refused " + std::to_string(++asked)).what ==
               Proposed::not_leader;
      },
      60s));
}

TEST(RaftLog, TheLeaderStoppedTheOthersLeadWithEveryCommittedEntryAndItCatchesUpOnItsReturn) {
  Cell cell;
  for (const std::string& entry : numbered(0, 10)) ASSERT_NE(cell.commit(entry), 0U);
  const int first = cell.leader();
  ASSERT_GE(first, 0);
  cell.stop(first);
  for (const std::string& entry : numbered(10, 100)) {  // past a snapshot threshold
    ASSERT_NE(cell.commit(entry), 0U) << entry;
  }
  const int second = cell.leader();
  ASSERT_GE(second, 0);
  ASSERT_NE(second, first);
  EXPECT_TRUE(
      testing::eventually([&] { return cell.machine(second).entries() == numbered(0, 100); }, 60s));
  // Back from its data directory: it replays its log, and the rest reaches it (by
  // entries or by a snapshot) from the leader.
  cell.start(first);
  EXPECT_TRUE(testing::eventually(
      [&] {
        auto entries = cell.machine(first).entries();
        return entries.size() >= 100 &&
               std::vector<std::string>(entries.end() - 100, entries.end()) == numbered(0, 100);
      },
      60s))
      << "the returning member applied " << cell.machine(first).entries().size();
}

// A single member restarted from its data directory finds every committed entry, of
// every length (libraft 0.15 cuts an entry whose length is not a multiple of 8, and
// every one after it, from a log it loads).
TEST(RaftLog, EntriesOfEveryLengthSurviveARestart) {
  Cell cell(1);
  ASSERT_EQ(cell.leader(), 0);
  std::vector<std::string> entries;
  for (std::size_t n = 1; n <= 17; ++n) entries.emplace_back(n, static_cast<char>('a' + n));
  for (const std::string& entry : entries) ASSERT_NE(cell.commit(entry), 0U);
  cell.stop(0);
  Recorder& machine = cell.machine(0);
  machine.restore("");
  cell.start(0);
  EXPECT_TRUE(testing::eventually([&] { return machine.entries() == entries; }, 60s))
      << "replayed " << machine.entries().size() << " of " << entries.size();
}

TEST(RaftLog, AProposalUnderWayWhenTheLogClosesIsToldOnce) {
  Cell cell(1);
  ASSERT_EQ(cell.leader(), 0);
  std::atomic<int> told{0};
  cell.log(0)->propose("first", [&](Proposed, std::uint64_t) { ++told; });
  cell.stop(0);  // closes with the proposal queued, under way or committed
  EXPECT_EQ(told.load(), 1) << "the proposal was told " << told.load() << " times";
}

}  // namespace
}  // namespace warden::server::cell
