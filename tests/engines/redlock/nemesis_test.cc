// redlock:// under a nemesis: 8 Clients on 8 threads take 2,500 turns on one lock (10,000
// in `make test-slow`, WARDEN_NEMESIS_GRANTS) while another thread freezes (SIGSTOP, later SIGCONT) and kills (kill -9, later a
// restart from the append-only file) masters, one of the 5 at a time, every 0.1-0.4 s.
// (With two down, 8 contenders must win all three remaining votes at once and the run
// takes several minutes under the sanitizers; quorum_test.cc covers two down.) A
// quorum stays reachable throughout, so every turn must be granted; no two turns may
// overlap, and every grant's fencing token must exceed the one before it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

constexpr int kMasters = 5;
constexpr int kMaxDown = 1;
constexpr int kClients = 8;
// The turns the run takes: $WARDEN_NEMESIS_GRANTS, or 2,500 (about a minute and a half
// under the sanitizers on 2 cores, some 300 strikes of the nemesis).
long grants_wanted() {
  if (const char* v = std::getenv("WARDEN_NEMESIS_GRANTS")) return std::stol(v);
  return 2'500;
}

// Freezes and kills masters at random (drawn from `seed`), at most `max_down` at a
// time, until stopped; then brings every master back. It owns the servers while it
// runs.
class Nemesis {
 public:
  Nemesis(RedisMasters& masters, int max_down, std::uint32_t seed)
      : masters_(masters),
        max_down_(max_down),
        state_(static_cast<std::size_t>(masters.size()), State::up),
        seed_(seed),
        thread_([this](std::stop_token stop) { run(stop); }) {}
  ~Nemesis() { stop(); }

  // Stops the nemesis and brings every master back up.
  void stop() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }

  long pauses() const { return pauses_; }
  long kills() const { return kills_; }
  int most_down() const { return most_down_; }
  std::uint32_t seed() const { return seed_; }
  const std::string& errors() const { return errors_; }  // after stop()

 private:
  enum class State { up, paused, killed };

  void run(const std::stop_token& stop) {
    std::mt19937 rng(seed_);
    const auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + pick(300)));
      std::vector<int> up;
      std::vector<int> down;
      for (int i = 0; i < masters_.size(); ++i) {
        (state_[static_cast<std::size_t>(i)] == State::up ? up : down).push_back(i);
      }
      if (!down.empty() && (static_cast<int>(down.size()) >= max_down_ || pick(2) == 0)) {
        bring_up(down[static_cast<std::size_t>(pick(static_cast<int>(down.size())))]);
      } else {
        const int victim = up[static_cast<std::size_t>(pick(static_cast<int>(up.size())))];
        if (pick(2) == 0) {
          masters_.server(victim).pause();
          state_[static_cast<std::size_t>(victim)] = State::paused;
          ++pauses_;
        } else {
          masters_.server(victim).kill9();
          state_[static_cast<std::size_t>(victim)] = State::killed;
          ++kills_;
        }
        most_down_ = std::max(most_down_.load(), static_cast<int>(down.size()) + 1);
      }
    }
    for (int i = 0; i < masters_.size(); ++i) bring_up(i);
  }

  void bring_up(int i) {
    auto& state = state_[static_cast<std::size_t>(i)];
    if (state == State::paused) masters_.server(i).resume();
    if (state == State::killed) {
      try {
        masters_.server(i).start();  // returns once the AOF is loaded and PING answers
      } catch (const std::runtime_error& e) {
        errors_ += "m" + std::to_string(i) + ": " + e.what() + "\n";
        return;  // still down; tried again later
      }
    }
    state = State::up;
  }

  RedisMasters& masters_;
  const int max_down_;
  std::vector<State> state_;  // the nemesis thread's own
  const std::uint32_t seed_;
  std::atomic<long> pauses_{0};
  std::atomic<long> kills_{0};
  std::atomic<int> most_down_{0};
  std::string errors_;
  std::jthread thread_;  // last: starts after everything above exists
};

TEST(RedlockNemesis, EveryGrantUnderFreezesAndKillsKeepsExclusionAndFencing) {
  const long kGrants = grants_wanted();
  RedisOptions persistent;
  persistent.persistence = true;  // a killed master comes back with its grant keys
  RedisMasters masters(kMasters, persistent);
  RedlockParams params;
  params.node_timeout = 50ms;
  params.retry_delay = 1ms;
  params.retry_jitter = 2ms;
  const ClientOptions options = redlock_options(2s);
  std::vector<Client> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(Client::open(masters.uri(params.query()), options));
  }

  std::mutex mu;
  long grants = 0;               // guarded by mu
  int holders = 0;               // guarded by mu
  std::uint64_t last_token = 0;  // guarded by mu
  long overlaps = 0;             // guarded by mu
  long regressions = 0;          // guarded by mu
  std::string first_problems;    // guarded by mu
  std::atomic<long> losses{0}, acquire_errors{0}, timeouts{0}, release_errors{0};

  const auto note = [&](const std::string& what) {  // with mu held
    if (first_problems.size() < 2000) first_problems += what + "\n";
  };

  const auto started = Clock::now();
  Nemesis nemesis(masters, kMaxDown, test_seed());
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      Lock lock = clients[static_cast<std::size_t>(c)].lock("g", "x");
      while (true) {
        {
          std::lock_guard guard(mu);
          if (grants >= kGrants) return;
        }
        Lease lease;
        try {
          lease = lock.acquire(Mode::exclusive, Wait::up_to(60s));
        } catch (const Error& e) {
          if (++acquire_errors <= 5) std::fprintf(stderr, "acquire failed: %s\n", e.what());
          continue;
        }
        if (!lease) {
          ++timeouts;
          continue;
        }
        const std::uint64_t token = lease.token();
        {
          std::lock_guard guard(mu);
          if (++holders != 1) {
            ++overlaps;
            note("client " + std::to_string(c) + " was granted token " + std::to_string(token) +
                 " while another client held the lock");
          }
          if (token <= last_token) {
            ++regressions;
            note("token " + std::to_string(token) + " after " + std::to_string(last_token));
          }
          last_token = token;
          if (grants < kGrants) ++grants;
        }
        std::this_thread::yield();  // room for an overlapping holder to show itself
        {
          std::lock_guard guard(mu);
          if (lease.lost()) ++losses;
          --holders;
        }
        try {
          lease.release();
        } catch (const Error& e) {
          if (++release_errors <= 5) std::fprintf(stderr, "release failed: %s\n", e.what());
          // the Lease's destructor retries it in the background
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto elapsed = Clock::now() - started;
  nemesis.stop();

  std::printf(
      "%ld grants in %.1f s (%.0f/s); nemesis (seed %u): %ld freezes, %ld kills, at most %d "
      "down at once; %ld timeouts, %ld acquire errors, %ld release errors, %ld losses\n",
      grants, seconds(elapsed), static_cast<double>(grants) / seconds(elapsed), nemesis.seed(),
      nemesis.pauses(), nemesis.kills(), nemesis.most_down(), timeouts.load(),
      acquire_errors.load(), release_errors.load(), losses.load());
  EXPECT_EQ(nemesis.errors(), "") << "a master did not come back";
  EXPECT_LE(nemesis.most_down(), kMaxDown);
  EXPECT_GT(nemesis.pauses() + nemesis.kills(), 0) << "the nemesis never struck";
  EXPECT_EQ(grants, kGrants);
  EXPECT_EQ(overlaps, 0) << first_problems;
  EXPECT_EQ(regressions, 0) << first_problems;
  EXPECT_EQ(losses.load(), 0) << "leases were lost while a quorum was up";
  EXPECT_EQ(acquire_errors.load(), 0) << "waiting acquires failed while a quorum was up";
  EXPECT_EQ(timeouts.load(), 0) << "waiting acquires timed out after 60 s";

  // Every master is back; the released lock holds nothing once stale keys (set by a
  // frozen master that ran a buffered SET NX on thawing) have expired.
  EXPECT_TRUE(no_grant_keys(masters, options.lock_defaults.ttl + kPrompt))
      << "left:" << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
