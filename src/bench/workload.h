// bench/workload.h — what the clients of `warden bench` do: lock/unlock cycles
// through warden::Client, and the hand-off measurement.
//
// Keys. Uncontended: client i cycles round-robin over its own K locks, so no two
// clients ever want the same lock and the figure is the cost of an uncontended
// acquire + release. Contended: every client cycles over the same K locks (client i
// starting at key i mod K), so clients queue behind each other.
//
// Modes. exclusive or shared for every acquire; mixed = each acquire is shared with
// probability 0.9 and exclusive with 0.1 (per-client pseudo-random sequence).
//
// Semaphores. With permits N > 0 every key is a semaphore of N permits and every cycle
// takes one of them (the mode is then not used). A baseline always takes locks: the
// ratio against the same engine's lock at another URL says what counting permits costs.
//
// Multi-locks. With members M > 1 every cycle takes a multi-lock of M keys in the
// workload's mode (exclusive or shared): the cycle's key and the M - 1 after it,
// wrapping around the K keys (K >= M). A baseline still takes one lock per cycle, so the
// ratio says what M members cost against one lock (the members are taken one by one:
// about 1/M is the cost of the core's ordered acquisition).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/run.h"
#include "bench/stats.h"

namespace warden::bench {

// The lock group of everything `warden bench` locks (and elects).
inline constexpr const char* kBenchGroup = "bench";

enum class LockMix { exclusive, shared, mixed };

std::string_view to_string(LockMix mix);

struct Workload {
  int clients = 1;
  int keys = 1;
  LockMix mix = LockMix::exclusive;
  bool contended = false;
  // Each cycle ends with Lease::release(), which waits for the backend's answer; without,
  // the lease is dropped as a scope ends, and the release is sent without waiting.
  bool confirm_releases = false;
  // Every lock is cached (LockOptions::cache): a client's repeated cycles on a lock
  // nobody else wants are served by its cache. Locks only: not with permits or members.
  bool cache = false;
  std::uint32_t permits = 0;              // > 0: each key a semaphore of this many
  int members = 0;                        // > 1: each cycle a multi-lock of this many keys
  std::chrono::milliseconds ttl{30'000};  // lease of every grant
  std::string run_id;                     // makes lock names unique to this run
};

// The lock name of key `key` for client `client` under `workload` ("<run>-k3" when
// contended, "<run>-c1-k3" otherwise). Inline: the baselines in the warden command's
// engine modules (cli/modules/) use it and link none of this folder's objects.
inline std::string lock_name(const Workload& workload, int client, int key) {
  if (workload.contended) return workload.run_id + "-k" + std::to_string(key);
  return workload.run_id + "-c" + std::to_string(client) + "-k" + std::to_string(key);
}

// One warden::Client per workload client, each with its own engine connections, and
// their Lock (or Semaphore, or MultiLock) objects. Throws warden::Error if `url` cannot
// be opened, or Error(unsupported) if the workload needs shared locks or semaphores the
// engine lacks.
std::vector<std::unique_ptr<CycleClient>> open_warden_clients(const std::string& url,
                                                              const Workload& workload);

// Hand-off latency to a queued waiter, `samples` times. Two clients A and B (each its
// own warden::Client) take turns on one lock: A acquires it; B announces that it is
// about to acquire and calls acquire (it queues); A waits 1 ms after that
// announcement, so that B's request has reached the lock service, then takes
// t0 = now and releases; B takes t1 = now when its acquire returns. One sample is
// t1 - t0 on this process's steady clock. With workload.cache, the hand-off from a
// cached lock instead: A acquires and drops the lock, which A's client keeps cached; B
// takes t0 and acquires (the backend asks A for the lock back), t1 when granted. Every
// wait of the protocol is bounded by `step_timeout`; a step that takes longer throws
// Error(deadline_exceeded).
Samples measure_handoff(const std::string& url, int samples, const Workload& workload,
                        std::chrono::milliseconds step_timeout);

}  // namespace warden::bench
