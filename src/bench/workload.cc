#include "bench/workload.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "warden/client.h"
#include "warden/error.h"

namespace warden::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Time A leaves B to get its request queued before A releases.
constexpr auto kQueueGrace = 1ms;

// Each cycle: the next of its handles (a Lock, Semaphore or MultiLock per key, taken
// round-robin from the client's index on), acquired by `acquire` waiting as long as it
// takes, then released; the time of the acquire alone is the cycle's latency.
template <class Handle, class Acquire>
class RoundRobinCycleClient final : public CycleClient {
 public:
  RoundRobinCycleClient(Client client, std::vector<Handle> handles, int index, Acquire acquire,
                        bool confirm_releases)
      : client_(std::move(client)),
        handles_(std::move(handles)),
        acquire_(std::move(acquire)),
        next_(static_cast<std::size_t>(index) % handles_.size()),
        confirm_releases_(confirm_releases) {}

  std::optional<std::chrono::nanoseconds> cycle(const std::stop_token& stop) override {
    Handle& handle = handles_[next_];
    if (++next_ == handles_.size()) next_ = 0;
    const auto t0 = Clock::now();
    auto held = acquire_(handle, stop);
    const auto t1 = Clock::now();
    if (!held) return std::nullopt;
    if (confirm_releases_) held.release();
    return t1 - t0;  // otherwise `held` is dropped here, as a scope's end drops a lease
  }

 private:
  Client client_;  // keeps the handles' connection open
  std::vector<Handle> handles_;
  Acquire acquire_;
  std::size_t next_;
  bool confirm_releases_;
};

template <class Handle, class Acquire>
std::unique_ptr<CycleClient> round_robin(Client client, std::vector<Handle> handles, int index,
                                         const Workload& workload, Acquire acquire) {
  return std::make_unique<RoundRobinCycleClient<Handle, Acquire>>(
      std::move(client), std::move(handles), index, std::move(acquire), workload.confirm_releases);
}

// The mode of one acquire: mixed = shared with probability 0.9, exclusive with 0.1.
Mode pick_mode(LockMix mix, std::minstd_rand& rng) {
  switch (mix) {
    case LockMix::exclusive:
      return Mode::exclusive;
    case LockMix::shared:
      return Mode::shared;
    case LockMix::mixed:
      break;
  }
  return rng() % 10 == 0 ? Mode::exclusive : Mode::shared;
}

// The workload's lease; fairness stays automatic: FIFO where the engine has it and
// barging where that is all it has (redlock://).
LockOptions lock_options(const Workload& workload) {
  LockOptions options;
  options.ttl = workload.ttl;
  options.cache = workload.cache && workload.permits == 0 && workload.members <= 1;
  return options;
}

// The hand-off from a cached lock (see measure_handoff): no threads, as nobody waits
// while A holds.
Samples measure_cached_handoff(const std::string& url, int samples, const Workload& workload,
                               std::chrono::milliseconds step_timeout) {
  const std::string name = workload.run_id + "-handoff";
  Client client_a = Client::open(url);
  Client client_b = Client::open(url);
  Lock lock_a = client_a.lock(kBenchGroup, name, lock_options(workload));
  LockOptions b_options = lock_options(workload);
  b_options.cache = false;  // B gives the lock back at once, so A's next acquire is free
  Lock lock_b = client_b.lock(kBenchGroup, name, b_options);
  Samples out;
  out.reserve(static_cast<std::size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    {
      Lease cached = lock_a.acquire(Mode::exclusive, Wait::up_to(step_timeout));
      if (!cached) throw Error(Errc::deadline_exceeded, "hand-off: A's acquire timed out");
    }  // dropped: A's client keeps it cached
    const auto asked = Clock::now();
    Lease lease = lock_b.acquire(Mode::exclusive, Wait::up_to(step_timeout));
    const auto granted = Clock::now();
    if (!lease) {
      throw Error(Errc::deadline_exceeded, "hand-off: the cached lock was not given back to B");
    }
    lease.release();
    out.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(granted - asked).count());
  }
  return out;
}

// The two sides of the hand-off protocol meet here.
struct HandoffBoard {
  enum class Phase { idle, a_holds, b_queuing, b_done, b_failed };
  std::mutex mu;
  std::condition_variable_any cv;  // _any: B's waits also end when B is asked to stop
  Phase phase = Phase::idle;       // guarded by mu
  Clock::time_point b_granted;     // guarded by mu
  std::exception_ptr b_error;      // guarded by mu

  void set(Phase p) {
    {
      std::lock_guard lock(mu);
      phase = p;
    }
    cv.notify_all();
  }
  // Waits until the phase is `want` or B failed; false after `timeout`.
  bool await(Phase want, std::chrono::milliseconds timeout, std::unique_lock<std::mutex>& lock) {
    return cv.wait_for(lock, timeout, [&] { return phase == want || phase == Phase::b_failed; });
  }
};

}  // namespace

std::string_view to_string(LockMix mix) {
  switch (mix) {
    case LockMix::exclusive:
      return "exclusive";
    case LockMix::shared:
      return "shared";
    case LockMix::mixed:
      return "mixed";
  }
  return "?";
}

std::vector<std::unique_ptr<CycleClient>> open_warden_clients(const std::string& url,
                                                              const Workload& workload) {
  std::vector<std::unique_ptr<CycleClient>> clients;
  clients.reserve(static_cast<std::size_t>(workload.clients));
  for (int i = 0; i < workload.clients; ++i) {
    Client client = Client::open(url);
    if (workload.permits > 0) {
      std::vector<Semaphore> semaphores;
      semaphores.reserve(static_cast<std::size_t>(workload.keys));
      for (int k = 0; k < workload.keys; ++k) {
        semaphores.push_back(client.semaphore(kBenchGroup, lock_name(workload, i, k),
                                              workload.permits, lock_options(workload)));
      }
      clients.push_back(round_robin(std::move(client), std::move(semaphores), i, workload,
                                    [](Semaphore& semaphore, const std::stop_token& stop) {
                                      return semaphore.acquire(1, Wait::forever(), stop);
                                    }));
      continue;
    }
    if (workload.mix != LockMix::exclusive && !client.capabilities().shared) {
      throw Error(Errc::unsupported, "this engine has no shared locks (use --mode exclusive)");
    }
    if (workload.members > 1) {
      const Mode mode = workload.mix == LockMix::shared ? Mode::shared : Mode::exclusive;
      std::vector<MultiLock> multis;
      multis.reserve(static_cast<std::size_t>(workload.keys));
      for (int k = 0; k < workload.keys; ++k) {
        std::vector<LockSpec> members;
        for (int m = 0; m < workload.members; ++m) {
          members.push_back(LockSpec{std::string(kBenchGroup),
                                     lock_name(workload, i, (k + m) % workload.keys), mode});
        }
        multis.push_back(client.multi(std::move(members), lock_options(workload)));
      }
      clients.push_back(round_robin(std::move(client), std::move(multis), i, workload,
                                    [](MultiLock& multi, const std::stop_token& stop) {
                                      return multi.acquire(Wait::forever(), stop);
                                    }));
      continue;
    }
    std::vector<Lock> locks;
    locks.reserve(static_cast<std::size_t>(workload.keys));
    for (int k = 0; k < workload.keys; ++k) {
      locks.push_back(client.lock(kBenchGroup, lock_name(workload, i, k), lock_options(workload)));
    }
    clients.push_back(
        round_robin(std::move(client), std::move(locks), i, workload,
                    [mix = workload.mix, rng = std::minstd_rand(static_cast<std::uint32_t>(i) + 1)](
                        Lock& lock, const std::stop_token& stop) mutable {
                      return lock.acquire(pick_mode(mix, rng), Wait::forever(), stop);
                    }));
  }
  return clients;
}

Samples measure_handoff(const std::string& url, int samples, const Workload& workload,
                        std::chrono::milliseconds step_timeout) {
  if (lock_options(workload).cache) {
    return measure_cached_handoff(url, samples, workload, step_timeout);
  }
  using Phase = HandoffBoard::Phase;
  const std::string name = workload.run_id + "-handoff";
  Client client_a = Client::open(url);
  Client client_b = Client::open(url);
  Lock lock_a = client_a.lock(kBenchGroup, name, lock_options(workload));
  Lock lock_b = client_b.lock(kBenchGroup, name, lock_options(workload));

  HandoffBoard board;
  // B: waits for A to hold the lock, announces itself, queues, records the grant time.
  // B's own stop token ends its waits and its acquire; the jthread's destructor
  // requests it on every way out of this function.
  std::jthread b([&](const std::stop_token& token) {
    try {
      while (true) {
        {
          std::unique_lock lock(board.mu);
          if (!board.cv.wait(lock, token, [&] { return board.phase == Phase::a_holds; })) return;
          board.phase = Phase::b_queuing;
        }
        board.cv.notify_all();
        Lease lease = lock_b.acquire(Mode::exclusive, Wait::forever(), token);
        const auto granted = Clock::now();
        if (!lease) return;  // stopped
        lease.release();
        {
          std::lock_guard lock(board.mu);
          board.b_granted = granted;
          board.phase = Phase::b_done;
        }
        board.cv.notify_all();
      }
    } catch (...) {
      {
        std::lock_guard lock(board.mu);
        board.b_error = std::current_exception();
        board.phase = Phase::b_failed;
      }
      board.cv.notify_all();
    }
  });

  auto stop_and_rethrow = [&](const std::string& step) {
    b.request_stop();
    b.join();
    std::lock_guard lock(board.mu);
    if (board.b_error) std::rethrow_exception(board.b_error);
    throw Error(Errc::deadline_exceeded, "hand-off: " + step + " took longer than " +
                                             std::to_string(step_timeout.count()) + " ms");
  };

  Samples out;
  out.reserve(static_cast<std::size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    Lease lease = lock_a.acquire(Mode::exclusive, Wait::up_to(step_timeout));
    if (!lease) stop_and_rethrow("A's acquire");
    board.set(Phase::a_holds);
    {
      std::unique_lock lock(board.mu);
      if (!board.await(Phase::b_queuing, step_timeout, lock) || board.phase == Phase::b_failed) {
        lock.unlock();
        stop_and_rethrow("B's start");
      }
    }
    std::this_thread::sleep_for(kQueueGrace);
    const auto released = Clock::now();
    lease.release();
    std::unique_lock lock(board.mu);
    if (!board.await(Phase::b_done, step_timeout, lock) || board.phase == Phase::b_failed) {
      lock.unlock();
      stop_and_rethrow("the hand-off to B");
    }
    out.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(board.b_granted - released).count());
    board.phase = Phase::idle;
  }
  b.request_stop();
  b.join();
  return out;
}

}  // namespace warden::bench
