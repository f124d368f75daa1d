// The PostgreSQL fixture itself leaves nothing behind on the machine: a postmaster killed
// with SIGKILL keeps its System V segment and its /dev/shm segments for good, and runs
// that leak one of each per server exhaust the machine's segments (kernel.shmmni) within
// a few days of CI, after which no PostgreSQL starts.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "support/postgres_server.h"

namespace warden::testing {
namespace {

// The ids of the System V shared memory segments that exist now.
std::set<int> shared_memory_ids() {
  std::ifstream in("/proc/sysvipc/shm");
  std::string line;
  std::getline(in, line);  // the header
  std::set<int> ids;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    long key = 0;
    int id = -1;
    if (fields >> key >> id) ids.insert(id);
  }
  return ids;
}

std::set<std::string> dev_shm_postgres_files() {
  std::set<std::string> names;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("PostgreSQL.")) names.insert(name);
  }
  return names;
}

// The processes whose parent is `parent` now.
std::set<pid_t> children_of(pid_t parent) {
  std::set<pid_t> children;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ignored)) {
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read from its closing ')'.
    std::istringstream rest(stat.substr(stat.rfind(')') + 1));
    char state = 0;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent)
      children.insert(std::stoi(entry.path().filename()));
  }
  return children;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// Whether segment `id` still exists 10 s from now. A segment removed while processes are
// attached goes when the last of them exits (the fixture's kill9 ends them all at once).
bool outlives_its_workers(int id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (shared_memory_ids().contains(id)) {
    if (std::chrono::steady_clock::now() >= deadline) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(PostgresFixture, AServerKilledAndGoneLeavesNoSharedMemoryBehind) {
  const std::set<std::string> files_before = dev_shm_postgres_files();
  int segment = -1;
  {
    PostgresServer server;
    segment = server.shared_memory_id();
    ASSERT_GE(segment, 0) << "no segment named in postmaster.pid";
    ASSERT_TRUE(shared_memory_ids().contains(segment));
    server.kill9();
  }
  EXPECT_FALSE(outlives_its_workers(segment))
      << "the killed server's System V segment " << segment << " outlived its fixture";
  // Another test's initdb makes and removes one of these for a moment: only a file that
  // stays is a leak.
  std::set<std::string> left;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    left.clear();
    for (const std::string& name : dev_shm_postgres_files()) {
      if (!files_before.contains(name)) left.insert(name);
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline);
  for (const std::string& name : left) ADD_FAILURE() << "left in /dev/shm: " << name;
}

TEST(PostgresFixture, AFrozenServerEndsWithItsFixtureAndLeavesNothingBehind) {
  int segment = -1;
  std::set<pid_t> workers;
  {
    PostgresServer server;
    segment = server.shared_memory_id();
    ASSERT_GE(segment, 0);
    workers = children_of(server.process().pid());
    ASSERT_FALSE(workers.empty());
    server.process().signal_family(SIGSTOP);  // frozen, as a failure test leaves it
  }
  EXPECT_FALSE(outlives_its_workers(segment));
  // A worker that outlived its postmaster exits once it notices: within seconds, unless
  // it is frozen, and then never.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (const pid_t worker : workers) {
    while (alive(worker) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_FALSE(alive(worker)) << "worker " << worker << " outlived its server";
  }
}

}  // namespace
}  // namespace warden::testing
