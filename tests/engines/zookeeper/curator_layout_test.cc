// zk://…?layout=curator against real kazoo processes (Debian's python3-kazoo 2.8, driven
// by kazoo_lock.py) on one real ZooKeeper: warden's requests are named as Curator's
// InterProcessMutex names them (_c_UUID-lock-SEQ; shared: _c_UUID-__READ__SEQ) under
// /CHROOT/GROUP/NAME, kazoo's Lock(extra_lock_patterns=["-lock-"]) counts them, and warden
// counts kazoo's __lock__ / __rlock__ nodes: each excludes the other both ways.
//
// Every holder, warden or kazoo, appends "start ID" and "end ID" to one markers file
// around its hold; two holds overlapped iff those lines interleave.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/election.h"
#include "warden/semaphore.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

constexpr std::string_view kChroot = "/apps";
const std::string kLockPath = "/apps/g/n";  // what kazoo and Curator are given
const std::regex kExclusiveNode(
    "_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-lock-[0-9]{10}");
const std::regex kSharedNode(
    "_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-__READ__[0-9]{10}");

void mark(const std::string& file, const std::string& line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  ASSERT_GE(fd, 0) << file;
  const std::string text = line + '\n';
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

std::vector<std::string> lines_of(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Holds never overlapped: the markers are "start X", "end X" pairs, one after another.
// Returns the holders' ids in hold order; a failure names the first overlap.
std::vector<std::string> holds_in(const std::string& file) {
  const auto lines = lines_of(file);
  std::vector<std::string> holders;
  for (std::size_t i = 0; i + 1 < lines.size(); i += 2) {
    const std::string who = lines[i].substr(lines[i].find(' ') + 1);
    EXPECT_EQ(lines[i], "start " + who) << "line " << i;
    EXPECT_EQ(lines[i + 1], "end " + who)
        << "line " << i + 1 << ": " << who << "'s hold overlaps another's";
    holders.push_back(who);
  }
  EXPECT_EQ(lines.size() % 2, 0u) << "a hold did not end";
  return holders;
}

class ZkCuratorLayout : public ::testing::Test {
 protected:
  // Empty containers stay (no container check within a test): kazoo checks a Lock's
  // path once, before its create.
  ZkCuratorLayout() : zk_(ZooKeeperOptions{.container_check_ms = 600'000}) {}

  std::string uri() const { return zk_.uri(std::string(kChroot)) + "?layout=curator"; }

  // A kazoo process: KIND on kLockPath, HOLDS holds of HOLD_MS (0: hold until stopped).
  ServerProcess kazoo(const std::string& id, const std::string& kind, int holds, int hold_ms) {
    ServerProcess process({"/usr/bin/python3", WARDEN_KAZOO_LOCK_PY, zk_.hosts(), kLockPath, id,
                           kind, std::to_string(holds), std::to_string(hold_ms), markers_},
                          dir_.path() / (id + ".log"));
    process.start();
    return process;
  }

  // The lock's request nodes, as anyone sees them.
  std::vector<std::string> requests() { return zk_.children(kLockPath); }

  bool queued(std::size_t n) {
    return eventually([&] { return requests().size() >= n; }, 20s);
  }

  ZooKeeperEnsemble zk_;
  TempDir dir_{"warden-curator"};
  const std::string markers_ = (dir_.path() / "markers").string();
};

TEST_F(ZkCuratorLayout, KazooAndWardenHoldersNeverOverlap) {
  constexpr int kKazooProcesses = 2;
  constexpr int kKazooHolds = 13;  // each
  constexpr int kWardenClients = 2;
  constexpr int kWardenHolds = 12;  // each: 2 * 13 + 2 * 12 = 50 holds in all
  std::vector<ServerProcess> kazoos;
  for (int i = 0; i < kKazooProcesses; ++i) {
    kazoos.push_back(kazoo("kazoo" + std::to_string(i), "lock", kKazooHolds, 5));
  }
  std::vector<std::future<void>> wardens;
  for (int i = 0; i < kWardenClients; ++i) {
    wardens.push_back(std::async(std::launch::async, [this, i] {
      Client client = Client::open(uri());
      const std::string id = "warden" + std::to_string(i);
      for (int hold = 0; hold < kWardenHolds; ++hold) {
        Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(60s));
        ASSERT_TRUE(lease) << id << " hold " << hold;
        mark(markers_, "start " + id);
        std::this_thread::sleep_for(5ms);
        mark(markers_, "end " + id);
        lease.release();
        std::this_thread::yield();
      }
    }));
  }
  for (auto& warden : wardens) warden.get();
  for (auto& process : kazoos) {
    EXPECT_TRUE(process.wait_for_log("done", std::chrono::seconds(60))) << process.log_text();
  }
  const auto holders = holds_in(markers_);
  EXPECT_EQ(holders.size(), 50u);
  std::map<std::string, int> per_holder;
  for (const auto& who : holders) ++per_holder[who];
  EXPECT_EQ(per_holder["kazoo0"], kKazooHolds);
  EXPECT_EQ(per_holder["kazoo1"], kKazooHolds);
  EXPECT_EQ(per_holder["warden0"], kWardenHolds);
  EXPECT_EQ(per_holder["warden1"], kWardenHolds);
  EXPECT_TRUE(eventually([&] { return requests().empty(); })) << describe(requests());
}

TEST_F(ZkCuratorLayout, AWardenHolderBlocksKazooUntilItReleases) {
  Client client = Client::open(uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  ServerProcess waiter = kazoo("kazoo", "lock", 1, 0);
  ASSERT_TRUE(waiter.wait_for_log("waiting 0", std::chrono::seconds(20))) << waiter.log_text();
  ASSERT_TRUE(queued(2)) << describe(requests());
  // kazoo's node is queued behind warden's, and stays there while warden holds.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(waiter.log_text().find("acquired"), std::string::npos) << waiter.log_text();
  held.release();
  EXPECT_TRUE(waiter.wait_for_log("done", std::chrono::seconds(20))) << waiter.log_text();
  EXPECT_EQ(holds_in(markers_), std::vector<std::string>{"kazoo"});
}

TEST_F(ZkCuratorLayout, AKazooHolderBlocksWardenUntilItReleases) {
  ServerProcess holder = kazoo("kazoo", "lock", 0, 0);
  ASSERT_TRUE(holder.wait_for_log("acquired 0", std::chrono::seconds(20))) << holder.log_text();
  Client client = Client::open(uri());
  EXPECT_FALSE(client.lock("g", "n").acquire(Mode::exclusive, Wait::none()));
  EXPECT_FALSE(client.lock("g", "n").acquire(Mode::shared, Wait::none()))
      << "kazoo's __lock__ node is an exclusive holder";
  auto waiter = std::async(std::launch::async, [&] {
    return client.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(30s));
  });
  ASSERT_TRUE(queued(2)) << describe(requests());
  EXPECT_EQ(waiter.wait_for(300ms), std::future_status::timeout) << "granted while kazoo holds";
  ASSERT_EQ(holder.stop(SIGTERM), 0) << holder.log_text();  // kazoo releases, then exits
  Lease lease = waiter.get();
  EXPECT_TRUE(lease) << "not granted after kazoo released";
}

TEST_F(ZkCuratorLayout, NodesAreNamedAsCuratorNamesThemUnderTheChroot) {
  Client client = Client::open(uri());
  Lease exclusive = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(exclusive);
  auto children = requests();
  ASSERT_EQ(children.size(), 1u) << describe(zk_.tree("/"));
  EXPECT_TRUE(std::regex_match(children[0], kExclusiveNode)) << children[0];
  // The status reads the same node, with its czxid as the token.
  const LockStatus status = client.inspect("g", "n");
  ASSERT_EQ(status.holders.size(), 1u);
  EXPECT_EQ(status.holders[0].mode, Mode::exclusive);
  EXPECT_EQ(status.holders[0].token, exclusive.token());
  EXPECT_EQ(client.list("g").size(), 1u);
  EXPECT_EQ(client.list("g")[0].name, "n");
  EXPECT_TRUE(client.check(exclusive.sequencer()));
  const std::uint64_t first_token = exclusive.token();
  exclusive.release();
  EXPECT_TRUE(requests().empty()) << "not removed on release:" << describe(requests());

  Lease shared = client.lock("g", "n").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);
  children = requests();
  ASSERT_EQ(children.size(), 1u);
  EXPECT_TRUE(std::regex_match(children[0], kSharedNode)) << children[0];
  EXPECT_GT(shared.token(), first_token) << "tokens go back";
  shared.release();
  EXPECT_TRUE(requests().empty()) << "not removed on release:" << describe(requests());
  // Nothing under warden's own default prefix.
  EXPECT_FALSE(zk_.exists("/warden"));
}

TEST_F(ZkCuratorLayout, WithoutAPathLocksLiveAtGroupSlashName) {
  Client client = Client::open(zk_.uri() + "?layout=curator");
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto children = zk_.children("/g/n");
  ASSERT_EQ(children.size(), 1u) << describe(zk_.tree("/"));
  EXPECT_TRUE(std::regex_match(children[0], kExclusiveNode)) << children[0];
  EXPECT_FALSE(zk_.exists("/warden"));
}

TEST_F(ZkCuratorLayout, AKazooWriteLockExcludesWardenReadersBothWays) {
  Client client = Client::open(uri());
  {
    ServerProcess writer = kazoo("kazoo-writer", "write", 0, 0);
    ASSERT_TRUE(writer.wait_for_log("acquired 0", std::chrono::seconds(20))) << writer.log_text();
    EXPECT_FALSE(client.lock("g", "n").acquire(Mode::shared, Wait::none()))
        << "a warden reader was granted while a kazoo WriteLock holds";
    ASSERT_EQ(writer.stop(SIGTERM), 0) << writer.log_text();
  }
  Lease reader = client.lock("g", "n").acquire(Mode::shared, Wait::up_to(10s));
  ASSERT_TRUE(reader);
  mark(markers_, "start warden-reader");
  ServerProcess writer = kazoo("kazoo-writer2", "write", 1, 0);
  ASSERT_TRUE(writer.wait_for_log("waiting 0", std::chrono::seconds(20))) << writer.log_text();
  ASSERT_TRUE(queued(2)) << describe(requests());
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(writer.log_text().find("acquired"), std::string::npos)
      << "a kazoo WriteLock was granted while a warden reader holds";
  mark(markers_, "end warden-reader");
  reader.release();
  EXPECT_TRUE(writer.wait_for_log("done", std::chrono::seconds(20))) << writer.log_text();
  EXPECT_EQ(holds_in(markers_),
            (std::vector<std::string>{"kazoo-writer", "warden-reader", "kazoo-writer2"}));
}

TEST_F(ZkCuratorLayout, WardenReadersShareWithKazooReadLocksAndExcludeWriters) {
  Client client = Client::open(uri());
  ServerProcess kazoo_reader = kazoo("kazoo-reader", "read", 0, 0);
  ASSERT_TRUE(kazoo_reader.wait_for_log("acquired 0", std::chrono::seconds(20)))
      << kazoo_reader.log_text();
  Lease reader = client.lock("g", "n").acquire(Mode::shared, Wait::none());
  EXPECT_TRUE(reader) << "a warden reader is refused beside a kazoo ReadLock";
  Client other = Client::open(uri());  // this thread's own would be an upgrade
  EXPECT_FALSE(other.lock("g", "n").acquire(Mode::exclusive, Wait::none()))
      << "a warden writer was granted beside readers";
  ServerProcess second = kazoo("kazoo-reader2", "read", 1, 0);
  EXPECT_TRUE(second.wait_for_log("done", std::chrono::seconds(20)))
      << "a kazoo ReadLock is refused beside a warden reader: " << second.log_text();
  const LockStatus status = client.inspect("g", "n");
  EXPECT_EQ(status.holders.size(), 2u) << "the kazoo reader and the warden reader";
  ASSERT_EQ(kazoo_reader.stop(SIGTERM), 0) << kazoo_reader.log_text();
  reader.release();
  EXPECT_TRUE(eventually([&] { return requests().empty(); })) << describe(requests());
}

TEST_F(ZkCuratorLayout, BadLayoutValuesAreRefusedAndChangeNothing) {
  const auto before = zk_.tree("/");
  for (const std::string value : {"", "Curator", "kazoo", "curator,warden", "curator "}) {
    try {
      Client::open(zk_.uri(std::string(kChroot)) + "?layout=" + value);
      ADD_FAILURE() << "layout='" << value << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << value << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("layout"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(zk_.tree("/"), before) << describe(zk_.tree("/"));
  // layout=warden is the default layout, under /warden.
  Client own = Client::open(zk_.uri() + "?layout=warden");
  ASSERT_TRUE(own.lock("g", "n").acquire(Mode::exclusive, Wait::none()));
}

TEST_F(ZkCuratorLayout, NamesThatAreNoNodeNameAndOtherPrimitivesAreRefused) {
  Client client = Client::open(uri());
  const auto before = zk_.tree("/");
  for (const std::string name : {"a/b", "/", ".", "..", "line\nbreak", "\xc3\xa9"}) {
    fails_with(Errc::invalid_argument,
               [&] { (void)client.lock("g", name).acquire(Mode::exclusive, Wait::none()); });
  }
  fails_with(Errc::unsupported, [&] { (void)client.semaphore("g", "s", 3); });
  fails_with(Errc::unsupported, [&] { (void)client.election("g", "e"); });
  EXPECT_FALSE(client.capabilities().semaphore);
  EXPECT_FALSE(client.capabilities().election);
  EXPECT_EQ(zk_.tree("/"), before) << describe(zk_.tree("/"));
  // Printable ASCII other than '/' is the node's name as it is.
  Lease odd = client.lock("g", "a b:c%").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(odd);
  EXPECT_EQ(zk_.children("/apps/g/a b:c%").size(), 1u) << describe(zk_.tree("/"));
}

}  // namespace
}  // namespace warden::testing
