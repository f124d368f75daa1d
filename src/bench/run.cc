#include "bench/run.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <latch>
#include <thread>

namespace warden::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Initial room for samples, so the first seconds of a run do not reallocate.
constexpr std::size_t kReserveSamples = 1 << 16;

// One thread's state. Aligned so that counters of different threads never share a
// cache line.
struct alignas(64) Slot {
  std::atomic<std::uint64_t> cycles{0};
  Samples samples;
  std::exception_ptr error;
};

void print_progress(const Progress& progress, Clock::duration elapsed, Clock::duration duration,
                    double rate) {
  const auto line = fmt::format("\r\x1b[K{}: {:.0f}/{:.0f} s, {:.0f} cycles/s", progress.label,
                                std::chrono::duration<double>(elapsed).count(),
                                std::chrono::duration<double>(duration).count(), rate);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void clear_progress() {
  std::fputs("\r\x1b[K", stderr);
  std::fflush(stderr);
}

}  // namespace

double RunResult::cycles_per_second() const {
  const double seconds = std::chrono::duration<double>(elapsed).count();
  return seconds > 0 ? static_cast<double>(cycles) / seconds : 0.0;
}

void accumulate(RunResult& total, RunResult&& part) {
  total.cycles += part.cycles;
  total.elapsed += part.elapsed;
  if (total.acquire_ns.empty()) {
    total.acquire_ns = std::move(part.acquire_ns);
  } else {
    total.acquire_ns.insert(total.acquire_ns.end(), part.acquire_ns.begin(), part.acquire_ns.end());
  }
}

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

RunResult run_timed(const std::vector<std::unique_ptr<CycleClient>>& clients,
                    std::chrono::nanoseconds duration, const Progress& progress) {
  const std::size_t n = clients.size();
  std::vector<Slot> slots(n);
  std::stop_source stop;
  std::atomic<bool> failed{false};
  std::latch ready(static_cast<std::ptrdiff_t>(n) + 1);
  std::atomic<bool> go{false};
  // Written before `go` is released; read by the threads after they saw it.
  Clock::time_point deadline{};

  std::vector<std::jthread> threads;
  threads.reserve(n);
  // If a thread cannot be started, those already running are released into a stopped
  // run, so that they end and can be joined.
  auto abandon = [&] {
    stop.request_stop();
    go.store(true);
    go.notify_all();
  };
  try {
    for (std::size_t i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        Slot& slot = slots[i];
        CycleClient& client = *clients[i];
        const std::stop_token token = stop.get_token();
        slot.samples.reserve(kReserveSamples);
        ready.count_down();
        go.wait(false, std::memory_order_acquire);
        std::uint64_t count = 0;
        try {
          while (!token.stop_requested()) {
            const auto latency = client.cycle(token);
            if (!latency) break;
            if (Clock::now() >= deadline) break;  // finished too late to count
            slot.samples.push_back(latency->count());
            slot.cycles.store(++count, std::memory_order_relaxed);
          }
        } catch (...) {
          slot.error = std::current_exception();
          failed.store(true);
          stop.request_stop();
        }
      });
    }
  } catch (...) {
    abandon();
    throw;
  }

  ready.arrive_and_wait();
  const Clock::time_point start = Clock::now();
  deadline = start + duration;
  go.store(true, std::memory_order_release);
  go.notify_all();

  // The main thread keeps time: a progress tick per second, and an early end if a
  // client failed.
  std::uint64_t last_total = 0;
  Clock::time_point last_tick = start;
  for (Clock::time_point next_tick = start + 1s; !failed.load();) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    if (now >= next_tick) {
      std::uint64_t total = 0;
      for (const Slot& slot : slots) total += slot.cycles.load(std::memory_order_relaxed);
      const double seconds = std::chrono::duration<double>(now - last_tick).count();
      if (progress.enabled) {
        print_progress(progress, now - start, duration,
                       static_cast<double>(total - last_total) / seconds);
      }
      last_total = total;
      last_tick = now;
      next_tick += 1s;
    }
    std::this_thread::sleep_until(std::min({next_tick, deadline, now + 50ms}));
  }
  stop.request_stop();
  for (std::jthread& t : threads) t.join();
  if (progress.enabled) clear_progress();

  for (const Slot& slot : slots) {
    if (slot.error) std::rethrow_exception(slot.error);
  }
  RunResult result;
  result.elapsed = duration;
  std::vector<Samples> parts;
  parts.reserve(n);
  for (Slot& slot : slots) {
    result.cycles += slot.cycles.load();
    parts.push_back(std::move(slot.samples));
  }
  result.acquire_ns = merge(parts);
  return result;
}

}  // namespace warden::bench
