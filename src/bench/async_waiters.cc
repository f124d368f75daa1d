#include "bench/async_waiters.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "warden/async.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kRoundLimit = 10min;  // a round that takes longer is reported as failed
// A group per phase: a phase that lists its waiters lists only its own locks (on zk:// and
// etcd:// a listing reads every lock of the group, and the other phases' stay until the
// server removes them).
// How long waits an engine cannot list are given to be under way before they are read.
constexpr auto kSettle = std::chrono::seconds(1);
// How long after a cancel the backend may still list the cancelled waits.
constexpr auto kLeaveLimit = std::chrono::seconds(10);

const std::string kSpreadGroup = "bench-async-spread";
const std::string kOneGroup = "bench-async-one";
const std::string kCancelGroup = "bench-async-cancel";

// A field of /proc/self/status ("Threads", "VmRSS"), as its number (VmRSS in kB).
long long status_field(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string word;
  while (status >> word) {
    if (word == name + ":") {
      long long value = 0;
      status >> value;
      return value;
    }
  }
  return -1;
}

// The bytes malloc has handed out and not had back, in every arena: what the waits hold,
// without what a freed allocation leaves resident (the listings that count the queue).
long long heap_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<long long>(info.uordblks + info.hblkhd);
}

// The heap in use once `n` waits have settled: read every 100 ms until three readings in a
// row move by less than 8 bytes a wait (up to 5 s; `settled` says whether they did).
// A backend's listing may show every wait queued while the calls that follow (a look, a
// watch) are still under way or queued in the client, each holding its request and
// the RPC library's buffers for a moment: that is the cost of asking, not of waiting.
long long settled_heap(std::uint64_t n, double& seconds, bool& settled) {
  const auto began = Clock::now();
  const long long still = static_cast<long long>(8 * n);
  long long last = heap_in_use();
  int quiet = 0;
  settled = false;
  while (Clock::now() - began < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const long long now = heap_in_use();
    quiet = std::llabs(now - last) < still ? quiet + 1 : 0;
    last = now;
    if (quiet == 3) {
      settled = true;
      break;
    }
  }
  seconds = seconds_since(began);
  return last;
}

// Counts callbacks; wakes a waiter when `expected` have been told.
class Tally {
 public:
  void told(bool granted, bool failed) {
    std::lock_guard guard(mu_);
    ++(failed ? failed_ : granted ? granted_ : empty_);
    done_.notify_all();
  }
  bool wait_for(std::uint64_t expected, Clock::duration limit) {
    std::unique_lock lock(mu_);
    return done_.wait_for(lock, limit, [&] { return granted_ + empty_ + failed_ >= expected; });
  }
  std::uint64_t granted() const { return locked(granted_); }
  std::uint64_t empty() const { return locked(empty_); }
  std::uint64_t failed() const { return locked(failed_); }

 private:
  std::uint64_t locked(const std::uint64_t& n) const {
    std::lock_guard guard(mu_);
    return n;
  }
  mutable std::mutex mu_;
  std::condition_variable done_;
  std::uint64_t granted_ = 0, empty_ = 0, failed_ = 0;
};

// Waiters the backend lists in the group now; nullopt if the engine cannot list.
std::optional<std::uint64_t> listed_waiters(const Client& client, const std::string& group) {
  // An engine without a queue (redlock://: waiters poll) lists none: nothing to wait for.
  if (!client.capabilities().fair) return std::nullopt;
  try {
    std::uint64_t sum = 0;
    for (const auto& summary : client.list(group)) sum += summary.waiters;
    return sum;
  } catch (const Error& e) {
    if (e.code() == Errc::unsupported) return std::nullopt;
    throw;
  }
}

// Waits until the backend lists `n` waiters in the group; false if it cannot list.
// Looks again after 1 ms, doubling to 20 ms: the one-lock phase asks this after every
// wait it makes, and a first pause of 20 ms alone made 10,000 waits take minutes to ask.
bool wait_queued(const Client& client, const std::string& group, std::uint64_t n) {
  const auto until = Clock::now() + kRoundLimit;
  auto pause = 1ms;
  while (true) {
    const auto listed = listed_waiters(client, group);
    if (!listed) return false;
    if (*listed >= n) return true;
    if (Clock::now() >= until) {
      throw std::runtime_error("only " + std::to_string(*listed) + " of " + std::to_string(n) +
                               " asynchronous waits were queued");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, 20ms);
  }
}

void await_all(Tally& tally, std::uint64_t n, const std::string& round) {
  if (!tally.wait_for(n, kRoundLimit)) {
    throw std::runtime_error(round + ": not every callback was told within 10 minutes");
  }
}

std::string name_of(std::uint64_t i) { return "w" + std::to_string(i); }

std::vector<Lease> hold_each(Client& holder, const std::string& group, std::uint64_t n,
                             const std::string& prefix) {
  std::vector<Lease> held;
  held.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    held.push_back(holder.lock(group, prefix + name_of(i)).acquire(Mode::exclusive, Wait::none()));
    if (!held.back()) throw std::runtime_error("the holder could not take " + prefix + name_of(i));
  }
  return held;
}

// In each round the Tally is made before the Clients: a Client closed with waits in flight
// (a round that throws) tells them, and the Tally must still be there.
void spread(const std::string& url, std::uint64_t n, AsyncWaitersResult& r) {
  Tally tally;
  Client holder = Client::open(url);
  Client waiter = Client::open(url);
  std::vector<Lease> held = hold_each(holder, kSpreadGroup, n, "spread-");
  r.threads_before = status_field("Threads");
  r.rss_before_bytes = status_field("VmRSS") * 1024;
  r.heap_before_bytes = heap_in_use();
  const auto asked = Clock::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    waiter.lock(kSpreadGroup, "spread-" + name_of(i))
        .acquire_async(Mode::exclusive, Wait::forever(),
                       [&tally](std::exception_ptr error, Lease lease) {
                         tally.told(lease.valid(), error != nullptr);
                       });
  }
  r.listed = wait_queued(holder, kSpreadGroup, n);
  // Not listed: the waits are read once under way (each has been asked at least once).
  if (!r.listed) std::this_thread::sleep_for(kSettle);
  r.queue_seconds = seconds_since(asked);
  r.threads_waiting = status_field("Threads");
  r.rss_waiting_bytes = status_field("VmRSS") * 1024;
  r.heap_waiting_bytes = heap_in_use();
  r.heap_settled_bytes = settled_heap(n, r.settle_seconds, r.heap_settled);
  const auto released = Clock::now();
  for (Lease& lease : held) lease.release();
  await_all(tally, n, "spread");
  r.grant_seconds = seconds_since(released);
  r.granted = tally.granted();
  r.failed += tally.failed();
}

void one_lock(const std::string& url, std::uint64_t n, AsyncWaitersResult& r) {
  Tally tally;
  std::mutex mu;
  std::vector<std::uint64_t> order;
  Client holder = Client::open(url);
  Client waiter = Client::open(url);
  LockOptions options;
  r.fifo_asked = waiter.capabilities().fair;
  options.fairness = r.fifo_asked ? Fairness::fifo : Fairness::automatic;
  Lease held = holder.lock(kOneGroup, "one", options).acquire(Mode::exclusive, Wait::none());
  if (!held) throw std::runtime_error("the holder could not take bench-async-one/one");
  order.reserve(n);
  Lock lock = waiter.lock(kOneGroup, "one", options);
  for (std::uint64_t i = 0; i < n; ++i) {
    lock.acquire_async(Mode::exclusive, Wait::forever(),
                       [&, i](std::exception_ptr error, Lease lease) {
                         if (lease) {
                           std::lock_guard guard(mu);
                           order.push_back(i);
                         }
                         tally.told(lease.valid(), error != nullptr);
                       });  // the Lease goes as the callback returns: the next one's turn
    // FIFO order is the order the backend queued them in: each waits its turn to queue.
    if (r.fifo_asked && r.listed) wait_queued(holder, kOneGroup, i + 1);
  }
  const auto released = Clock::now();
  held.release();
  await_all(tally, n, "one lock");
  r.one_lock_seconds = seconds_since(released);
  r.one_lock_granted = tally.granted();
  r.failed += tally.failed();
  std::lock_guard guard(mu);
  r.one_lock_fifo = order.size() == n;
  for (std::uint64_t i = 0; r.one_lock_fifo && i < n; ++i) r.one_lock_fifo = order[i] == i;
}

void cancel(const std::string& url, std::uint64_t n, AsyncWaitersResult& r) {
  Tally tally;
  Client holder = Client::open(url);
  Client waiter = Client::open(url);
  std::vector<Lease> held = hold_each(holder, kCancelGroup, n, "cancel-");
  std::vector<AcquireHandle> handles;
  handles.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    handles.push_back(waiter.lock(kCancelGroup, "cancel-" + name_of(i))
                          .acquire_async(Mode::exclusive, Wait::forever(),
                                         [&tally](std::exception_ptr error, Lease lease) {
                                           tally.told(lease.valid(), error != nullptr);
                                         }));
  }
  if (r.listed) {
    wait_queued(holder, kCancelGroup, n);
  } else {
    std::this_thread::sleep_for(kSettle);
  }
  const auto cancelled = Clock::now();
  for (const AcquireHandle& handle : handles) handle.cancel();
  await_all(tally, n, "cancel");
  r.cancel_seconds = seconds_since(cancelled);
  r.cancelled = tally.empty();
  r.failed += tally.failed();
  // An engine may tell a cancelled wait before its withdrawal has landed (etcd://,
  // zk://): what counts is that nothing stays, so the backend is read until it lists no
  // waiter, for up to kLeaveLimit.
  if (r.listed) {
    const auto until = Clock::now() + kLeaveLimit;
    while (true) {
      r.left_waiting = listed_waiters(holder, kCancelGroup).value_or(0);
      if (r.left_waiting == 0 || Clock::now() >= until) break;
      std::this_thread::sleep_for(20ms);
    }
    r.left_seconds = seconds_since(cancelled);
  }
  for (Lease& lease : held) lease.release();
}

}  // namespace

AsyncWaitersResult async_waiters(const std::string& url, std::uint64_t waiters) {
  AsyncWaitersResult r;
  r.waiters = waiters;
  spread(url, waiters, r);
  one_lock(url, waiters, r);
  cancel(url, waiters, r);
  return r;
}

}  // namespace warden::bench
