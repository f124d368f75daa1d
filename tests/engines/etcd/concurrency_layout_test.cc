// etcd://…?layout=concurrency keeps its locks where etcd's own concurrency.Mutex, v3lock
// and `etcdctl lock` keep theirs, so a warden client and `etcdctl lock PFX/G/N` exclude
// each other on one lock. Every test runs the real etcdctl (Debian's etcd-client) against
// the test cluster: holders of both kinds write start/end markers to one file, and the
// file shows who held when.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "compose/engine_registry.h"
#include "core/engine.h"
#include "core/uri.h"
#include "test_util.h"
#include "warden/election.h"
#include "warden/semaphore.h"

extern char** environ;

namespace warden::testing {
namespace {

constexpr std::string_view kChildUriVariable = "WARDEN_CONCURRENCY_HOLDER_URI";

// A process of this test's own, started with posix_spawn (stdout and stderr to `out`) in
// our environment minus ETCDCTL_* plus ETCDCTL_API=3, and stopped by its pid: SIGKILL and
// reap on destruction if it still runs.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::filesystem::path& out,
        const std::vector<std::string>& extra_env = {}) {
    // Without this shard's GTEST_ variables: a child that runs one case of this binary
    // (below) would otherwise run only its share of that one case, which is none when
    // the case falls in another shard.
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) {
      const std::string_view entry(*e);
      if (!entry.starts_with("ETCDCTL_") && !entry.starts_with("GTEST_")) env.emplace_back(*e);
    }
    env.emplace_back("ETCDCTL_API=3");
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args_copy = argv;
    std::vector<char*> args;
    for (auto& a : args_copy) args.push_back(a.data());
    args.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const int rc = posix_spawn(&pid_, args[0], &actions, &attr, args.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + argv.at(0));
  }
  ~Child() { kill9(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  bool running() {
    if (pid_ < 0) return false;
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == 0) return true;
    if (done == pid_) record(status);
    pid_ = -1;
    return false;
  }
  // The exit status (128+signal when killed) once it ends within `limit`; -1 if it was
  // still running then (it is killed).
  int wait(Clock::duration limit) {
    if (!eventually([&] { return !running(); }, limit)) {
      kill9();
      return -1;
    }
    return status_;
  }
  void kill9() {
    if (pid_ < 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    record(status);
    pid_ = -1;
  }

 private:
  void record(int status) {
    if (WIFEXITED(status)) status_ = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) status_ = 128 + WTERMSIG(status);
  }

  pid_t pid_ = -1;
  int status_ = -1;
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Appends one line with a single write to a file opened O_APPEND: the lines of several
// processes never mix.
void append_line(const std::filesystem::path& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  const std::string text = line + '\n';
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

class EtcdConcurrencyLayout : public ::testing::Test {
 protected:
  // etcd's lock "pfx/g/n", as etcdctl names it.
  static constexpr const char* kLockName = "pfx/g/n";
  static constexpr const char* kLockPrefix = "pfx/g/n/";

  std::string uri(std::string_view path = "/pfx") const {
    return "etcd://" + cluster_.endpoints() + std::string(path) + "?layout=concurrency";
  }

  std::filesystem::path file(const std::string& name) const { return dir_.path() / name; }

  // `etcdctl lock LOCK -- /bin/sh -c SCRIPT sh ARGS...`, its output in a log of its own.
  std::unique_ptr<Child> etcdctl_lock(const std::string& lock, const std::string& script,
                                      const std::vector<std::string>& args = {}) {
    std::vector<std::string> argv{etcdctl_path(),
                                  "--endpoints=" + cluster_.endpoints(),
                                  "lock",
                                  lock,
                                  "--",
                                  "/bin/sh",
                                  "-c",
                                  script,
                                  "sh"};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<Child>(argv, file("etcdctl-" + std::to_string(++runs_) + ".log"));
  }

  // Runs etcdctl with `args` (safe on any thread) and returns what it printed.
  std::string etcdctl_output(const std::vector<std::string>& args) {
    std::vector<std::string> argv{etcdctl_path(), "--endpoints=" + cluster_.endpoints()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto out = file("get-" + std::to_string(++runs_) + ".out");
    Child child(argv, out);
    EXPECT_EQ(child.wait(30s), 0) << read_file(out);
    return read_file(out);
  }

  // The key with the lowest create_revision under `prefix` and that revision, read with
  // etcdctl: etcd's Mutex's owner of the lock.
  std::pair<std::string, std::int64_t> owner_of(const std::string& prefix) {
    const std::string out = etcdctl_output({"get", prefix, "--prefix", "--sort-by=CREATE",
                                            "--order=ASCEND", "--limit=1", "-w", "fields"});
    std::pair<std::string, std::int64_t> owner{"", 0};
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("\"Key\" : \"")) owner.first = line.substr(9, line.size() - 10);
      if (line.starts_with("\"CreateRevision\" : ")) owner.second = std::stoll(line.substr(19));
    }
    return owner;
  }

  EtcdCluster cluster_;
  TempDir dir_{"warden-concurrency"};
  std::atomic<int> runs_{0};
};

// The lines of a holders' log, checked: every "start ID" is followed by its own "end ID
// REV [TOKEN]" before anyone else starts; REVs (each holder's key's create_revision, read
// while it held) strictly increase; a warden holder's TOKEN is its REV.
struct HoldLog {
  int holds = 0;
  int warden_holds = 0;
  int etcdctl_holds = 0;
  int handovers_between_kinds = 0;
};

HoldLog check_hold_log(const std::string& text) {
  HoldLog log;
  std::istringstream lines(text);
  std::string open;  // the holder between its start and its end
  std::int64_t last_revision = 0;
  std::string last_kind;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string what, id;
    fields >> what >> id;
    if (what == "start") {
      EXPECT_TRUE(open.empty()) << id << " started while " << open << " held the lock";
      open = id;
      continue;
    }
    EXPECT_EQ(what, "end") << line;
    EXPECT_EQ(id, open) << "an end of " << id << " while " << open << " held";
    open.clear();
    std::int64_t revision = 0;
    fields >> revision;
    EXPECT_GT(revision, last_revision) << id << " was granted out of revision order";
    last_revision = revision;
    const std::string kind = id.substr(0, id.find('-'));
    if (kind == "warden") {
      std::uint64_t token = 0;
      fields >> token;
      EXPECT_EQ(token, static_cast<std::uint64_t>(revision)) << id << ": token is not the key's "
                                                             << "create_revision";
      ++log.warden_holds;
    } else {
      ++log.etcdctl_holds;
    }
    if (!last_kind.empty() && kind != last_kind) ++log.handovers_between_kinds;
    last_kind = kind;
    ++log.holds;
  }
  EXPECT_TRUE(open.empty()) << open << " never ended";
  return log;
}

TEST_F(EtcdConcurrencyLayout, EtcdctlLockAndWardenHoldersNeverOverlapAndAreGrantedInRevisionOrder) {
  constexpr int kThreadsPerKind = 3;
  constexpr int kHoldsPerKind = 25;
  const auto log = file("holds.log");
  // An etcdctl holder: its marker lines around a read of its own key's create_revision.
  const std::string script = "echo \"start etcdctl-$1\" >> " + log.string() + "; rev=$(" +
                             etcdctl_path() + " --endpoints=" + cluster_.endpoints() +
                             " get \"$ETCD_LOCK_KEY\" -w fields | sed -n "
                             "'s/^\"CreateRevision\" : //p'); echo \"end etcdctl-$1 $rev\" >> " +
                             log.string();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreadsPerKind; ++t) {
    const int share = kHoldsPerKind / kThreadsPerKind + (t < kHoldsPerKind % kThreadsPerKind);
    threads.emplace_back([&, t, share] {
      Client client = Client::open(uri());
      for (int i = 0; i < share; ++i) {
        Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(60s));
        if (!lease) {
          ++failures;
          return;
        }
        const std::string id = "warden-" + std::to_string(t) + "." + std::to_string(i);
        append_line(log, "start " + id);
        const auto [key, revision] = owner_of(kLockPrefix);
        append_line(log, "end " + id + " " + std::to_string(revision) + " " +
                             std::to_string(lease.token()));
        lease.release();
      }
    });
    threads.emplace_back([&, t, share] {
      for (int i = 0; i < share; ++i) {
        auto child = etcdctl_lock(kLockName, script, {std::to_string(t) + "." + std::to_string(i)});
        if (child->wait(60s) != 0) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << "a holder did not get the lock (see the etcdctl logs)";

  const HoldLog holds = check_hold_log(read_file(log));
  EXPECT_EQ(holds.holds, 2 * kHoldsPerKind);
  EXPECT_EQ(holds.warden_holds, kHoldsPerKind);
  EXPECT_EQ(holds.etcdctl_holds, kHoldsPerKind);
  EXPECT_GE(holds.handovers_between_kinds, 2) << "the two kinds never took turns";
  EXPECT_TRUE(cluster_.keys(kLockPrefix).empty()) << describe(cluster_.keys(kLockPrefix));
}

TEST_F(EtcdConcurrencyLayout, AWardenHolderBlocksEtcdctlLockUntilItReleases) {
  Client client = Client::open(uri());
  Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const auto got = file("got");
  auto waiter = etcdctl_lock(kLockName, "echo got >> " + got.string());
  ASSERT_TRUE(eventually([&] { return cluster_.keys(kLockPrefix).size() == 2; }, 10s))
      << "etcdctl never queued:" << describe(cluster_.keys(kLockPrefix));
  // Queued behind warden's key: it waits for its delete, not for anything else.
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(waiter->running());
  EXPECT_FALSE(std::filesystem::exists(got)) << "etcdctl ran its command while warden held";

  lease.release();
  EXPECT_EQ(waiter->wait(20s), 0);
  EXPECT_EQ(read_file(got), "got\n");
  EXPECT_TRUE(cluster_.keys(kLockPrefix).empty()) << describe(cluster_.keys(kLockPrefix));
}

TEST_F(EtcdConcurrencyLayout, AnEtcdctlHolderBlocksWardenUntilItsCommandEnds) {
  const auto held = file("held");
  const auto go = file("go");
  // Holds until the test creates `go` (and gives up on its own after ~30 s).
  auto holder = etcdctl_lock(kLockName, "echo held >> " + held.string() + "; i=0; while [ ! -e " +
                                            go.string() +
                                            " ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); "
                                            "done");
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(held); }, 20s));
  const auto [etcdctl_key, etcdctl_revision] = owner_of(kLockPrefix);

  Client client = Client::open(uri());
  EXPECT_FALSE(client.lock("g", "n").acquire(Mode::exclusive, Wait::none()))
      << "a try took the lock etcdctl holds";
  EXPECT_EQ(cluster_.keys(kLockPrefix).size(), 1u) << "the failed try left its key behind";

  auto waiter = std::async(std::launch::async, [&] {
    return client.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(60s));
  });
  ASSERT_TRUE(eventually([&] { return cluster_.keys(kLockPrefix).size() == 2; }, 10s));
  EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout) << "warden passed etcdctl";

  append_line(go, "go");
  Lease lease = waiter.get();
  ASSERT_TRUE(lease);
  EXPECT_GT(lease.token(), static_cast<std::uint64_t>(etcdctl_revision));
  EXPECT_EQ(holder->wait(20s), 0);
  EXPECT_EQ(cluster_.keys(kLockPrefix).size(), 1u);
  EXPECT_NE(cluster_.keys(kLockPrefix).front(), etcdctl_key);
}

TEST_F(EtcdConcurrencyLayout, TheKeyIsTheLockNameSlashTheHexLeaseItIsAttachedToWithAnEmptyValue) {
  Client client = Client::open(uri());
  Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const auto keys = cluster_.keys_by_revision(kLockPrefix);
  ASSERT_EQ(keys.size(), 1u);
  const std::string lease_hex = lease_of(cluster_, keys[0].key);
  ASSERT_FALSE(lease_hex.empty()) << keys[0].key << " has no lease";
  EXPECT_EQ(keys[0].key, kLockPrefix + lease_hex);
  EXPECT_EQ(keys[0].value, "");
  EXPECT_EQ(static_cast<std::uint64_t>(keys[0].create_revision), lease.token());
  EXPECT_TRUE(client.check(lease.sequencer()));

  // Another thread of the same Client queues with a key (and lease) of its own: one
  // lease per request, or both requests would be the one key.
  auto second = std::async(std::launch::async, [&] {
    return client.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(30s));
  });
  ASSERT_TRUE(eventually([&] { return cluster_.keys(kLockPrefix).size() == 2; }, 10s));
  const auto both = cluster_.keys_by_revision(kLockPrefix);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].key, keys[0].key);
  EXPECT_EQ(both[1].key, kLockPrefix + lease_of(cluster_, both[1].key));
  EXPECT_NE(lease_of(cluster_, both[1].key), lease_hex);
  // warden reads the lock as etcd's Mutex does: the lowest revision holds.
  const LockStatus status = client.inspect("g", "n");
  ASSERT_EQ(status.holders.size(), 1u);
  EXPECT_EQ(status.holders[0].token, lease.token());
  EXPECT_EQ(status.waiters.size(), 1u);
  const auto locks = client.list("g");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].name, "n");
  EXPECT_EQ(locks[0].holders, 1u);
  EXPECT_EQ(locks[0].waiters, 1u);

  lease.release();
  Lease next = second.get();
  ASSERT_TRUE(next);
  EXPECT_EQ(next.token(), static_cast<std::uint64_t>(both[1].create_revision));
  next.release();
  EXPECT_TRUE(cluster_.keys(kLockPrefix).empty());
}

TEST_F(EtcdConcurrencyLayout, WithoutAPathTheLockIsGroupSlashName) {
  Client client = Client::open(uri(""));
  Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const auto keys = cluster_.keys();
  ASSERT_EQ(keys.size(), 1u) << describe(keys);
  EXPECT_EQ(keys[0], "g/n/" + lease_of(cluster_, keys[0]));

  // And `etcdctl lock g/n` is that lock.
  auto waiter = etcdctl_lock("g/n", "true");
  ASSERT_TRUE(eventually([&] { return cluster_.keys("g/n/").size() == 2; }, 10s));
  EXPECT_TRUE(waiter->running());
  lease.release();
  EXPECT_EQ(waiter->wait(20s), 0);
}

TEST_F(EtcdConcurrencyLayout, ACachedLockGoesBackWhenEtcdctlAsksForIt) {
  Client client = Client::open(uri());
  LockOptions cached;
  cached.cache = true;
  {
    Lease lease = client.lock("g", "n", cached).acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
  }
  ASSERT_EQ(cluster_.keys(kLockPrefix).size(), 1u) << "the released lock was not kept";
  const auto got = file("got");
  auto waiter = etcdctl_lock(kLockName, "echo got >> " + got.string());
  EXPECT_EQ(waiter->wait(20s), 0) << "the cached grant never went back";
  EXPECT_EQ(read_file(got), "got\n");
}

TEST_F(EtcdConcurrencyLayout, ABadLayoutSharedModeSemaphoresElectionsAndSlashesAreRefused) {
  const std::string base = "etcd://" + cluster_.endpoints() + "/pfx?layout=";
  for (const std::string bad : {"", "Concurrency", "mutex", "concurrency,warden"}) {
    try {
      Client::open(base + bad);
      ADD_FAILURE() << "layout=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
      EXPECT_NE(std::string_view(e.what()).find("layout"), std::string_view::npos) << e.what();
    }
  }

  Client client = Client::open(uri());
  EXPECT_FALSE(client.capabilities().shared);
  fails_with(Errc::unsupported,
             [&] { (void)client.lock("g", "n").acquire(Mode::shared, Wait::none()); });
  fails_with(Errc::unsupported, [&] { (void)client.semaphore("g", "n", 2); });
  fails_with(Errc::unsupported, [&] { (void)client.election("g", "n"); });
  fails_with(Errc::invalid_argument,
             [&] { (void)client.lock("g", "a/b").acquire(Mode::exclusive, Wait::none()); });

  EXPECT_TRUE(cluster_.keys().empty()) << "a refused call wrote:" << describe(cluster_.keys());
  EXPECT_EQ(cluster_.etcdctl({"lease", "list"}), "found 0 leases\n");
}

TEST_F(EtcdConcurrencyLayout, AGrantRefBuiltFromTheKeyAndLeaseAnyoneCanReadChangesNothing) {
  Client holder = Client::open(uri());
  Lease lease = holder.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const auto keys = cluster_.keys_by_revision(kLockPrefix);
  ASSERT_EQ(keys.size(), 1u);
  core::GrantRef forged;
  forged.key = core::LockKey{"g", "n"};
  forged.mode = Mode::exclusive;
  forged.token = lease.token();
  forged.ttl = LockOptions{}.ttl;
  forged.owner =
      std::to_string(std::stoll(lease_of(cluster_, keys[0].key), nullptr, 16)) + ' ' + keys[0].key;

  std::unique_ptr<core::Engine> stranger =
      compose::open_engine(core::Uri::parse(uri()), ClientOptions{});
  const auto renewed = stranger->renew(std::span(&forged, 1));
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_FALSE(renewed[0].expires) << "renewed another client's grant";
  stranger->release(forged);
  EXPECT_EQ(cluster_.keys(kLockPrefix).size(), 1u) << "the holder's key was deleted";
  EXPECT_TRUE(holder.check(lease.sequencer()));
}

// The leases etcd has, in hex without leading zeros as etcd's lock keys name them
// (`lease list` prints "found N leases", then one zero-padded id per line).
std::set<std::string> leases_of(EtcdCluster& cluster) {
  std::istringstream lines(cluster.etcdctl({"lease", "list"}));
  std::set<std::string> out;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.starts_with("found ")) continue;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%llx", std::stoull(line, nullptr, 16));
    out.insert(hex);
  }
  return out;
}

bool lease_alive(EtcdCluster& cluster, const std::string& lease_hex) {
  return cluster.etcdctl({"lease", "timetolive", lease_hex}).find("granted with TTL") !=
         std::string::npos;
}

TEST_F(EtcdConcurrencyLayout, ARequestIsOnTheClientsSessionLeaseAndReleaseLeavesItAlive) {
  Client client = Client::open(uri());
  Lease n = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(n);
  Lease m = client.lock("g", "m").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(m);
  const auto n_keys = cluster_.keys(kLockPrefix);
  const auto m_keys = cluster_.keys("pfx/g/m/");
  ASSERT_EQ(n_keys.size(), 1u);
  ASSERT_EQ(m_keys.size(), 1u);
  const std::string session = lease_of(cluster_, n_keys[0]);
  ASSERT_FALSE(session.empty());
  EXPECT_EQ(lease_of(cluster_, m_keys[0]), session)
      << "two locks of one Client with one TTL are on different leases";
  EXPECT_EQ(leases_of(cluster_), std::set<std::string>{session});

  // Release deletes the key only: the session lease lives on with m's key on it.
  const std::uint64_t n_token = n.token();
  n.release();
  EXPECT_TRUE(cluster_.keys(kLockPrefix).empty()) << describe(cluster_.keys(kLockPrefix));
  EXPECT_TRUE(lease_alive(cluster_, session)) << "release revoked the session lease";
  EXPECT_TRUE(client.check(m.sequencer()));

  // The same name again, on the same lease: a request after a release is not "another
  // live request" of the lock.
  Lease again = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(again);
  EXPECT_EQ(cluster_.keys(kLockPrefix), std::vector<std::string>{kLockPrefix + session});
  EXPECT_GT(again.token(), n_token);
  again.release();
  m.release();
  EXPECT_TRUE(cluster_.keys("pfx/").empty()) << describe(cluster_.keys("pfx/"));
  EXPECT_TRUE(lease_alive(cluster_, session));
}

TEST_F(EtcdConcurrencyLayout, UnlockThenLockAgainStaysOnTheSessionLease) {
  Client client = Client::open(uri());
  Lease other = client.lock("g", "other").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(other);
  const std::string session = lease_of(cluster_, cluster_.keys("pfx/g/other/").at(0));
  // unlock() sends its release without waiting for it; the next request on the lock
  // waits for that delete rather than queue behind it on a lease of its own.
  Lock lock = client.lock("g", "n");
  for (int i = 0; i < 10; ++i) {
    lock.lock();
    EXPECT_EQ(cluster_.keys(kLockPrefix), std::vector<std::string>{kLockPrefix + session});
    lock.unlock();
  }
  EXPECT_TRUE(lock.try_lock()) << "a try right after unlock() found the lock busy";
  lock.unlock();
  EXPECT_TRUE(eventually([&] { return cluster_.keys(kLockPrefix).empty(); }));
  EXPECT_EQ(leases_of(cluster_), std::set<std::string>{session});
  other.release();
}

TEST_F(EtcdConcurrencyLayout, TwoThreadsOfOneClientOnOneLockTakeTurnsTheSecondOnALeaseOfItsOwn) {
  Client client = Client::open(uri());
  // Held throughout: its key tells the session lease, and keeps the session in use.
  Lease other = client.lock("g", "other").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(other);
  const std::string session = lease_of(cluster_, cluster_.keys("pfx/g/other/").at(0));

  // One holds, the other queues: one key on the session, the other on a lease of its own.
  Lease first = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(first);
  auto second = std::async(std::launch::async, [&] {
    return client.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(60s));
  });
  ASSERT_TRUE(eventually([&] { return cluster_.keys(kLockPrefix).size() == 2; }, 10s));
  const auto both = cluster_.keys_by_revision(kLockPrefix);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].key, kLockPrefix + session);
  const std::string own = lease_of(cluster_, both[1].key);
  EXPECT_NE(own, session);
  EXPECT_EQ(both[1].key, kLockPrefix + own);
  EXPECT_EQ(second.wait_for(200ms), std::future_status::timeout) << "both threads held";
  first.release();
  Lease next = second.get();
  ASSERT_TRUE(next);
  EXPECT_EQ(next.token(), static_cast<std::uint64_t>(both[1].create_revision));
  next.release();
  EXPECT_TRUE(cluster_.keys(kLockPrefix).empty()) << describe(cluster_.keys(kLockPrefix));
  EXPECT_TRUE(eventually([&] { return leases_of(cluster_) == std::set<std::string>{session}; }))
      << "the own lease outlived its request";

  // Both threads at once, many times: never both holding, every hold served.
  constexpr int kHolds = 20;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> served{0};
  const auto cycle = [&] {
    for (int i = 0; i < kHolds; ++i) {
      Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(60s));
      if (!lease) return;
      if (inside.fetch_add(1) != 0) ++overlaps;
      std::this_thread::yield();
      inside.fetch_sub(1);
      ++served;
      lease.release();
    }
  };
  std::thread a(cycle);
  std::thread b(cycle);
  a.join();
  b.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(served.load(), 2 * kHolds);
  EXPECT_TRUE(cluster_.keys(kLockPrefix).empty()) << describe(cluster_.keys(kLockPrefix));
  EXPECT_TRUE(eventually([&] { return leases_of(cluster_) == std::set<std::string>{session}; }))
      << "own leases outlived their requests";
  EXPECT_TRUE(client.check(other.sequencer()));
  other.release();
}

TEST_F(EtcdConcurrencyLayout, ARevokedSessionLosesItsGrantsFreesTheLockAndWaitersQueueAgain) {
  // Keep-alive rounds every TTL/3 = 1 s.
  Client client = Client::open(uri(), with_ttl(3s));
  Client other = Client::open(uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  std::atomic<bool> told{false};
  held.on_lost([&] { told = true; });
  // A request of the same session waiting behind another Client's holder.
  Lease blocker = other.lock("g", "q").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(blocker);
  auto waiting = std::async(std::launch::async, [&] {
    return client.lock("g", "q").acquire(Mode::exclusive, Wait::up_to(60s));
  });
  ASSERT_TRUE(eventually([&] { return cluster_.keys("pfx/g/q/").size() == 2; }, 10s));
  const std::string session = lease_of(cluster_, cluster_.keys(kLockPrefix).at(0));
  ASSERT_EQ(lease_of(cluster_, cluster_.keys_by_revision("pfx/g/q/").at(1).key), session);

  cluster_.etcdctl({"lease", "revoke", session});
  ASSERT_TRUE(eventually([&] { return held.lost(); }, 30s)) << "the grant was not reported lost";
  EXPECT_TRUE(eventually([&] { return told.load(); })) << "on_lost did not run";
  EXPECT_FALSE(client.check(held.sequencer()));
  EXPECT_NO_THROW(held.release());

  // The lock is free for etcdctl.
  const auto got = file("got");
  auto etcdctl = etcdctl_lock(kLockName, "echo got >> " + got.string());
  EXPECT_EQ(etcdctl->wait(30s), 0) << "etcdctl did not get the lock of a revoked session";
  EXPECT_EQ(read_file(got), "got\n");

  // The waiter queued again on a new session and is served once the holder leaves.
  ASSERT_TRUE(eventually(
      [&] {
        const auto q = cluster_.keys_by_revision("pfx/g/q/");
        return q.size() == 2 && lease_of(cluster_, q[1].key) != session;
      },
      30s))
      << describe(cluster_.keys("pfx/g/q/"));
  const std::uint64_t blocker_token = blocker.token();
  blocker.release();
  ASSERT_EQ(waiting.wait_for(30s), std::future_status::ready);
  Lease next = waiting.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), blocker_token);
  EXPECT_FALSE(next.lost());
  EXPECT_TRUE(client.check(next.sequencer()));
  next.release();
  EXPECT_TRUE(cluster_.keys("pfx/").empty()) << describe(cluster_.keys("pfx/"));
}

TEST_F(EtcdConcurrencyLayout, WithTheWatchdogOffEveryRequestHasALeaseOfItsOwnRevokedOnRelease) {
  ClientOptions options;
  options.watchdog = false;
  Client client = Client::open(uri(), options);
  Lease n = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(n);
  Lease m = client.lock("g", "m").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(m);
  const std::string n_lease = lease_of(cluster_, cluster_.keys(kLockPrefix).at(0));
  const std::string m_lease = lease_of(cluster_, cluster_.keys("pfx/g/m/").at(0));
  EXPECT_NE(n_lease, m_lease);
  n.release();
  m.release();
  EXPECT_TRUE(cluster_.keys("pfx/").empty()) << describe(cluster_.keys("pfx/"));
  EXPECT_TRUE(eventually([&] { return leases_of(cluster_).empty(); }))
      << cluster_.etcdctl({"lease", "list"});
}

TEST_F(EtcdConcurrencyLayout, AClientClosedWithoutReleaseFreesTheLockWithItsLease) {
  std::unique_ptr<Child> waiter;
  {
    // Locked through Lockable and never unlocked: the grant ends with the Client's last
    // handle, which revokes its session lease.
    Client client = Client::open(uri());
    Lock lock = client.lock("g", "n");
    ASSERT_TRUE(lock.try_lock());
    waiter = etcdctl_lock(kLockName, "true");
    ASSERT_TRUE(eventually([&] { return cluster_.keys(kLockPrefix).size() == 2; }, 10s));
    EXPECT_TRUE(waiter->running());
  }
  EXPECT_EQ(waiter->wait(20s), 0) << "etcdctl did not get the lock of a closed Client";
  EXPECT_TRUE(eventually([&] { return cluster_.keys(kLockPrefix).empty(); }));
}

TEST_F(EtcdConcurrencyLayout, AKilledWardenHolderFreesTheLockWhenItsLeaseEnds) {
  const auto out = file("holder.out");
  // This test binary again, running only the holder below: a process of its own that
  // takes the lock with a 1 s TTL and then waits to be killed.
  Child holder({"/proc/self/exe", "--gtest_also_run_disabled_tests",
                "--gtest_filter=EtcdConcurrencyLayoutChild.DISABLED_HoldsUntilKilled"},
               out, {std::string(kChildUriVariable) + "=" + uri()});
  ASSERT_TRUE(eventually([&] { return read_file(out).find("HELD") != std::string::npos; }, 60s))
      << read_file(out);
  ASSERT_EQ(cluster_.keys(kLockPrefix).size(), 1u);

  const auto got = file("got");
  auto waiter = etcdctl_lock(kLockName, "echo got >> " + got.string());
  ASSERT_TRUE(eventually([&] { return cluster_.keys(kLockPrefix).size() == 2; }, 10s));
  EXPECT_TRUE(waiter->running());
  EXPECT_FALSE(std::filesystem::exists(got));

  holder.kill9();
  EXPECT_EQ(waiter->wait(30s), 0) << "the lease of a killed holder never ended";
  EXPECT_EQ(read_file(got), "got\n");
}

// Run only as the child of AKilledWardenHolderFreesTheLockWhenItsLeaseEnds.
TEST(EtcdConcurrencyLayoutChild, DISABLED_HoldsUntilKilled) {
  const char* uri = std::getenv(std::string(kChildUriVariable).c_str());
  if (uri == nullptr) GTEST_SKIP() << "run by AKilledWardenHolderFreesTheLockWhenItsLeaseEnds";
  Client client = Client::open(uri, with_ttl(1000ms));
  Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(30s));
  ASSERT_TRUE(lease);
  std::printf("HELD\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(120s);
}

}  // namespace
}  // namespace warden::testing
