// redis_lock_child — a second process for the redis:// tests: a lock client whose
// death (kill -9) or contention the test process observes from outside. It reports on
// stdout, one flushed line per event.
//
//   redis_lock_child wait URI GROUP NAME MODE
//     prints "acquiring", acquires (Wait::forever), prints "granted TOKEN", then holds
//     until it is killed.
//   redis_lock_child contend URI GROUP NAME THREADS ROUNDS COUNTER_FILE
//     THREADS threads each acquire ROUNDS times, exclusive on every third turn and
//     shared otherwise, and use the FencedCounter in COUNTER_FILE under the lock; then
//     prints "done exclusive=E shared=S stale=X violations=V failures=F".
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "fenced_counter.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace {

using namespace std::chrono_literals;
using warden::testing::FencedCounter;

// How long a holder works between its read and its write (or its two reads): long
// enough that a second holder would get in between, short enough for a quick test.
constexpr auto kWork = 100us;

int wait_mode(const std::string& uri, const std::string& group, const std::string& name,
              warden::Mode mode) {
  warden::Client client = warden::Client::open(uri);
  std::cout << "acquiring" << std::endl;
  warden::Lease lease = client.lock(group, name).acquire(mode, warden::Wait::forever());
  std::cout << "granted " << lease.token() << std::endl;
  while (true) std::this_thread::sleep_for(1h);
}

struct Counts {
  std::atomic<long> exclusive{0}, shared{0}, stale{0}, violations{0}, failures{0};
};

void exclusive_turn(const FencedCounter& counter, std::uint64_t token, Counts& counts) {
  const auto before = counter.read_exclusive(token);
  if (!before) {
    ++counts.stale;
    return;
  }
  std::this_thread::sleep_for(kWork);
  switch (counter.increment(token, *before)) {
    case FencedCounter::Write::ok:
      ++counts.exclusive;
      break;
    case FencedCounter::Write::stale:
      ++counts.stale;
      break;
    case FencedCounter::Write::changed:
      ++counts.violations;
      break;
  }
}

void shared_turn(const FencedCounter& counter, std::uint64_t token, Counts& counts) {
  const auto first = counter.read_shared(token);
  std::this_thread::sleep_for(kWork);
  const auto second = counter.read_shared(token);
  if (!first || !second) {
    ++counts.stale;
  } else if (*first != *second) {
    ++counts.violations;  // a writer got in while a reader held the lock
  } else {
    ++counts.shared;
  }
}

int contend_mode(const std::string& uri, const std::string& group, const std::string& name,
                 int threads, int rounds, const std::string& file) {
  warden::Client client = warden::Client::open(uri);
  const warden::Lock lock = client.lock(group, name);
  const FencedCounter counter(file);
  Counts counts;
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (int r = 0; r < rounds; ++r) {
          const auto mode = (t + r) % 3 == 0 ? warden::Mode::exclusive : warden::Mode::shared;
          try {
            warden::Lock mine = lock;
            warden::Lease lease = mine.acquire(mode, warden::Wait::up_to(30s));
            if (!lease) {
              ++counts.failures;
              continue;
            }
            if (mode == warden::Mode::exclusive) {
              exclusive_turn(counter, lease.token(), counts);
            } else {
              shared_turn(counter, lease.token(), counts);
            }
            if (lease.lost()) ++counts.failures;
            lease.release();
          } catch (const std::exception& e) {
            std::cerr << "contender: " << e.what() << std::endl;
            ++counts.failures;
          }
        }
      });
    }
  }
  std::cout << "done exclusive=" << counts.exclusive << " shared=" << counts.shared
            << " stale=" << counts.stale << " violations=" << counts.violations
            << " failures=" << counts.failures << std::endl;
  return 0;
}

int usage() {
  std::cerr << "usage: redis_lock_child wait URI GROUP NAME exclusive|shared\n"
               "       redis_lock_child contend URI GROUP NAME THREADS ROUNDS COUNTER_FILE\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 5 && args[0] == "wait") {
      const auto mode = args[4] == "shared" ? warden::Mode::shared : warden::Mode::exclusive;
      return wait_mode(args[1], args[2], args[3], mode);
    }
    if (args.size() == 7 && args[0] == "contend") {
      return contend_mode(args[1], args[2], args[3], std::stoi(args[4]), std::stoi(args[5]),
                          args[6]);
    }
  } catch (const std::exception& e) {
    std::cerr << "redis_lock_child: " << e.what() << std::endl;
    return 1;
  }
  return usage();
}
