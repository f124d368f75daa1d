#include "support/contention.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

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

}  // namespace

std::string ContentionResult::problems() const {
  std::string out;
  const auto check = [&](bool ok, const std::string& what) {
    if (!ok) out += what + "; ";
  };
  check(failures == 0, std::to_string(failures) + " acquires failed, timed out or were lost");
  check(overlaps == 0, std::to_string(overlaps) + " overlaps of a writer with another holder");
  check(rejected == 0, std::to_string(rejected) + " stale tokens used");
  check(stale_reads == 0, std::to_string(stale_reads) + " reads saw the counter move");
  check(exclusive_turns == want_exclusive,
        std::to_string(exclusive_turns) + " of " + std::to_string(want_exclusive) +
            " exclusive turns");
  check(shared_turns == want_shared,
        std::to_string(shared_turns) + " of " + std::to_string(want_shared) + " shared turns");
  check(counter == static_cast<std::uint64_t>(want_exclusive),
        "the counter is " + std::to_string(counter));
  return out;
}

ContentionResult run_fenced_contention(const std::string& uri, const std::string& group,
                                       const std::string& name) {
  using namespace std::chrono_literals;
  std::vector<Client> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(Client::open(uri));
  const std::string key = group + '/' + name;

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
      Lock lock = clients[static_cast<std::size_t>(t % kClients)].lock(group, name);
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
          if (lease.token() < gate.highest(key)) ++rejected;
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

  ContentionResult result;
  for (int t = 0; t < kClients * kThreadsPerClient; ++t) {
    for (int r = 0; r < kRounds; ++r) result.want_exclusive += shared_turn(t, r) ? 0 : 1;
  }
  result.want_shared = long{kClients} * kThreadsPerClient * kRounds - result.want_exclusive;
  result.exclusive_turns = exclusive_turns;
  result.shared_turns = shared_turns;
  result.overlaps = overlaps;
  result.rejected = rejected;
  result.stale_reads = stale_reads;
  result.failures = failures;
  result.counter = counter;
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf("%ld exclusive and %ld shared turns in %.2f s\n", result.exclusive_turns,
              result.shared_turns, result.seconds);
  return result;
}

}  // namespace warden::testing
