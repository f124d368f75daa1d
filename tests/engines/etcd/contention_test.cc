// etcd:// under contention: 32 threads of 8 Clients take shared and exclusive turns on
// one lock. Writers increment a plain (non-atomic) counter behind a FenceGate; readers
// check that the counter stands still while they hold the lock and that no writer
// admitted after them. Mutual exclusion holds exactly when the counter ends at the
// number of exclusive turns, with no overlap seen and no token rejected.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/fence_gate.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

constexpr int kClients = 8;
constexpr int kThreadsPerClient = 4;
constexpr int kRounds = 6;  // turns per thread

bool shared_turn(int thread, int round) { return (thread + round) % 4 == 0; }

TEST(EtcdContention, ThirtyTwoThreadsKeepMutualExclusionAndFencing) {
  EtcdCluster cluster;
  std::vector<Client> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(Client::open(cluster.uri()));

  FenceGate gate;
  std::uint64_t counter = 0;  // deliberately not atomic: the lock protects it
  std::atomic<int> writers{0};
  std::atomic<int> readers{0};
  std::atomic<long> exclusive_turns{0}, shared_turns{0}, overlaps{0}, rejected{0},
      stale_reads{0}, failures{0};
  std::atomic<bool> go{false};

  const auto started = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients * kThreadsPerClient; ++t) {
    threads.emplace_back([&, t] {
      Lock lock = clients[static_cast<std::size_t>(t % kClients)].lock("g", "x");
      while (!go) std::this_thread::yield();
      for (int r = 0; r < kRounds; ++r) {
        const bool shared = shared_turn(t, r);
        Lease lease;
        try {
          lease = lock.acquire(shared ? Mode::shared : Mode::exclusive, Wait::up_to(60s));
        } catch (const Error& e) {
          std::fprintf(stderr, "acquire failed: %s\n", e.what());
        }
        if (!lease) {
          ++failures;
          continue;
        }
        if (shared) {
          ++readers;
          if (writers != 0) ++overlaps;
          // A reader's grant came after every writer the gate admitted.
          if (lease.token() < gate.highest("g/x")) ++rejected;
          const std::uint64_t seen = counter;
          std::this_thread::sleep_for(1ms);
          if (counter != seen) ++stale_reads;
          if (writers != 0) ++overlaps;
          --readers;
          ++shared_turns;
        } else {
          if (++writers != 1 || readers != 0) ++overlaps;
          if (!gate.admit(lease.sequencer())) ++rejected;
          const std::uint64_t value = counter;
          std::this_thread::yield();
          counter = value + 1;
          --writers;
          ++exclusive_turns;
        }
        if (lease.lost()) ++failures;
        try {
          lease.release();
        } catch (const Error& e) {
          std::fprintf(stderr, "release failed: %s\n", e.what());
          ++failures;
        }
      }
    });
  }
  go = true;
  for (auto& thread : threads) thread.join();
  const auto took = Clock::now() - started;

  long want_exclusive = 0;
  for (int t = 0; t < kClients * kThreadsPerClient; ++t) {
    for (int r = 0; r < kRounds; ++r) want_exclusive += shared_turn(t, r) ? 0 : 1;
  }
  const long want_shared = long{kClients} * kThreadsPerClient * kRounds - want_exclusive;
  EXPECT_EQ(failures, 0) << "acquires that failed, timed out or were lost";
  EXPECT_EQ(overlaps, 0) << "a writer overlapped another holder";
  EXPECT_EQ(rejected, 0) << "a stale token was used";
  EXPECT_EQ(stale_reads, 0) << "the counter moved under a reader";
  EXPECT_EQ(exclusive_turns, want_exclusive);
  EXPECT_EQ(shared_turns, want_shared);
  EXPECT_EQ(counter, static_cast<std::uint64_t>(want_exclusive));
  RecordProperty("seconds", std::to_string(seconds(took)));
  std::printf("%ld exclusive and %ld shared turns in %.2f s\n", exclusive_turns.load(),
              shared_turns.load(), seconds(took));
  EXPECT_TRUE(eventually([&] { return lock_keys(cluster, "g", "x").empty(); }, kPrompt))
      << "left:" << describe(lock_keys(cluster, "g", "x"));
}

}  // namespace
}  // namespace warden::testing
