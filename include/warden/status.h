// warden/status.h — what a backend says about one lock, or about a group's locks:
// the answers of Client::inspect and Client::list (`warden status`).
//
// A status is a snapshot taken by one read of the backend: by the time it is shown,
// holders may have released and waiters may have been granted. It is for people and
// monitoring, never for deciding who holds a lock (hold a Lease, or check a Sequencer).
//
// Engines that answer (docs/status.md): mem:// and warden:// (holders with the time
// left on their leases, waiters in queue order with their deadlines, lock-delay);
// redis:// (the same, but waiters' deadlines unknown); etcd:// and zk:// (holders and
// waiters by the engine's queue rule; lease time and waiters' deadlines unknown: they
// live in the session and the waiting client); redlock:// (the holder a quorum of
// masters agrees on; no queue).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "warden/types.h"

namespace warden {

// One grant held now.
struct HolderStatus {
  Mode mode = Mode::exclusive;
  // The grant's fencing token; 0 (never a token) when the engine cannot tell which
  // token the holder has (mysql://, rarely: docs/engines/mysql.md, Status).
  std::uint64_t token = 0;
  // Time until the lease runs out unless renewed (0 if it is running out now);
  // nullopt when the backend ties leases to something else (a ZooKeeper session).
  std::optional<std::chrono::milliseconds> ttl_left;
  // A semaphore's grant: the permits it holds (mode is then shared); 0 for a lock's.
  std::uint32_t permits = 0;
  // An election's leader: the value it proclaimed last (warden/election.h); empty for a
  // lock's holder.
  std::string value{};
};

// One request waiting for the lock.
struct WaiterStatus {
  Mode mode = Mode::exclusive;
  // Time until the waiter gives up; nullopt when it waits without a deadline, or the
  // backend does not record waiters' deadlines.
  std::optional<std::chrono::milliseconds> deadline_left;
  // A request for a semaphore's permits: how many; 0 for a lock's.
  std::uint32_t permits = 0;
};

// One lock as the backend sees it. A lock nobody holds or waits for is "free": both
// lists empty (backends forget such locks, so free and never-used look the same).
struct LockStatus {
  std::string group;
  std::string name;
  std::vector<HolderStatus> holders;  // in grant order where the backend knows it
  std::vector<WaiterStatus> waiters;  // in queue order: the next to be granted first
  // Time before an expired lock may be granted again (lock-delay); 0 when none runs.
  std::chrono::milliseconds lock_delay_left{0};
  // The semaphore's number of permits when (group, name) is one in use; 0 for a lock.
  std::uint32_t permits = 0;
};

// One lock of a group, in Client::list.
struct LockSummary {
  std::string name;
  std::size_t holders = 0;
  std::size_t waiters = 0;
};

}  // namespace warden
