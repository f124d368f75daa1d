#include "bench/election_failover.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/workload.h"
#include "warden/client.h"
#include "warden/election.h"

extern char** environ;

namespace warden::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kName = "failover";
constexpr const char* kDoomed = "doomed";
constexpr const char* kSuccessor = "successor";

// A `warden elect` process leading until it is killed, in a process group of its own so
// that the kill takes its command too.
class LeaderProcess {
 public:
  LeaderProcess(const std::string& exe, const std::string& url, std::chrono::milliseconds ttl) {
    const std::vector<std::string> args = {
        exe,      "elect", "--url",   url,     "--group", kBenchGroup,
        "--name", kName,   "--value", kDoomed, "--ttl",   std::to_string(ttl.count()) + "ms",
        "--",     "sleep", "3600"};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const int rc = posix_spawn(&pid_, exe.c_str(), &files, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw std::runtime_error("cannot start " + exe + " elect");
  }
  ~LeaderProcess() { kill(); }
  LeaderProcess(const LeaderProcess&) = delete;
  LeaderProcess& operator=(const LeaderProcess&) = delete;

  bool running() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace

ElectionFailoverResult election_failover(const std::string& url, const std::string& warden_exe,
                                         int samples, std::chrono::milliseconds ttl) {
  ElectionFailoverResult result;
  result.ttl = ttl;
  ClientOptions options;
  options.lock_defaults.ttl = ttl;
  Client client = Client::open(url, options);
  Election election = client.election(kBenchGroup, kName);
  // The observer: when it last reported a leader named kSuccessor.
  Client watcher = Client::open(url, options);
  std::mutex mu;
  std::condition_variable seen;
  std::optional<Clock::time_point> successor_seen;
  std::jthread observer([&](std::stop_token stop) {
    watcher.election(kBenchGroup, kName)
        .observe(
            [&](const std::optional<Leader>& leader) {
              std::lock_guard lock(mu);
              if (leader && leader->value == kSuccessor) {
                if (!successor_seen) successor_seen = Clock::now();
              } else {
                successor_seen.reset();
              }
              seen.notify_all();
            },
            stop);
  });
  for (int i = 0; i < samples; ++i) {
    LeaderProcess leader(warden_exe, url, ttl);
    // Until the leader process leads (it may first wait out the previous sample's lease).
    const auto give_up = Clock::now() + 10 * ttl + std::chrono::seconds(10);
    while (true) {
      const auto now = election.leader();
      if (now && now->value == kDoomed) break;
      if (!leader.running() || Clock::now() > give_up) {
        throw std::runtime_error("the leader process never led " + url);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto successor = std::async(std::launch::async, [&] {
      return election.campaign(kSuccessor, Wait::up_to(10 * ttl + std::chrono::seconds(10)));
    });
    // Queued behind the leader before it dies (a request that arrives later would
    // measure its own round trip, not the failover).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto killed = Clock::now();
    leader.kill();
    Leadership next = successor.get();
    const auto led = Clock::now();
    if (!next) throw std::runtime_error("nobody led " + url + " after the leader died");
    result.failover_ns.push_back(std::chrono::nanoseconds(led - killed).count());
    {
      std::unique_lock lock(mu);
      if (!seen.wait_for(lock, 10 * ttl + std::chrono::seconds(10),
                         [&] { return successor_seen.has_value(); })) {
        throw std::runtime_error("the observer never saw the next leader on " + url);
      }
      result.observed_ns.push_back(std::chrono::nanoseconds(*successor_seen - killed).count());
    }
    next.resign();
    {
      // The next sample starts once the observer saw the resignation.
      std::unique_lock lock(mu);
      seen.wait_for(lock, 10 * ttl + std::chrono::seconds(10),
                    [&] { return !successor_seen.has_value(); });
    }
  }
  return result;
}

}  // namespace warden::bench
