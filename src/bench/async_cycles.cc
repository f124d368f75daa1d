#include "bench/async_cycles.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "bench/stats.h"
#include "warden/async.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::bench {
namespace {

constexpr const char* kCyclesGroup = "bench-cycles";

std::string slot_name(int i) { return "slot-" + std::to_string(i); }

// The counters both sides share: cycles confirmed, failures, and whether to go on.
struct Counters {
  std::atomic<std::uint64_t> cycles{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<bool> running{true};
};

// One slot of the asynchronous side: acquire, release, again, each from the callback of
// the step before; `idle` counts the slots that stopped.
class AsyncSlot : public std::enable_shared_from_this<AsyncSlot> {
 public:
  AsyncSlot(Lock lock, Counters& counters, std::function<void()> stopped)
      : lock_(std::move(lock)), counters_(counters), stopped_(std::move(stopped)) {}

  void next() {
    if (!counters_.running) {
      stopped_();
      return;
    }
    lock_.acquire_async(Mode::exclusive, Wait::up_to(std::chrono::seconds(10)),
                        [self = shared_from_this()](std::exception_ptr error, Lease lease) {
                          self->granted(error, std::move(lease));
                        });
  }

 private:
  void granted(std::exception_ptr error, Lease lease) {
    if (error || !lease) {
      ++counters_.failed;
      next();
      return;
    }
    lease.release_async([self = shared_from_this()](std::exception_ptr released) {
      if (released) {
        ++self->counters_.failed;
      } else {
        ++self->counters_.cycles;
      }
      self->next();
    });
  }

  Lock lock_;
  Counters& counters_;
  std::function<void()> stopped_;
};

// Cycles per second over `each`, counted after a warm-up of a tenth of it.
double per_second(Counters& counters, Clock::duration each) {
  std::this_thread::sleep_for(each / 10);
  const auto from_cycles = counters.cycles.load();
  const auto from = Clock::now();
  std::this_thread::sleep_for(each);
  const auto cycles = counters.cycles.load() - from_cycles;
  return static_cast<double>(cycles) / seconds_since(from);
}

void run_async(const std::string& url, int k, Clock::duration each, AsyncCyclesRow& row) {
  Client client = Client::open(url);
  Counters counters;
  std::mutex mu;
  std::condition_variable all_stopped;
  int stopped = 0;
  for (int i = 0; i < k; ++i) {
    auto slot = std::make_shared<AsyncSlot>(client.lock(kCyclesGroup, slot_name(i)), counters, [&] {
      std::lock_guard guard(mu);
      if (++stopped == k) all_stopped.notify_all();
    });
    slot->next();
  }
  row.async_per_second = per_second(counters, each);
  counters.running = false;
  std::unique_lock lock(mu);
  all_stopped.wait(lock, [&] { return stopped == k; });
  row.async_failed = counters.failed;
}

void run_blocking(const std::string& url, int k, Clock::duration each, AsyncCyclesRow& row) {
  Client client = Client::open(url);
  Counters counters;
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(k));
    for (int i = 0; i < k; ++i) {
      threads.emplace_back([&, lock = client.lock(kCyclesGroup, slot_name(i))]() mutable {
        while (counters.running) {
          try {
            Lease lease = lock.acquire(Mode::exclusive, Wait::up_to(std::chrono::seconds(10)));
            if (!lease) {
              ++counters.failed;
              continue;
            }
            lease.release();
            ++counters.cycles;
          } catch (const Error&) {
            ++counters.failed;
          }
        }
      });
    }
    row.blocking_per_second = per_second(counters, each);
    counters.running = false;
  }
  row.blocking_failed = counters.failed;
}

}  // namespace

AsyncCyclesResult async_cycles(const std::string& url, const std::vector<int>& in_flight,
                               Clock::duration each) {
  AsyncCyclesResult result;
  result.seconds_each = std::chrono::duration<double>(each).count();
  for (const int k : in_flight) {
    AsyncCyclesRow row;
    row.in_flight = k;
    run_async(url, k, each, row);
    run_blocking(url, k, each, row);
    result.rows.push_back(row);
  }
  return result;
}

}  // namespace warden::bench
