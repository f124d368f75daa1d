// warden/multi_lock.h — several locks taken all or nothing, without deadlock.
//
//   warden::MultiLock pair = client.multi({{"accounts", "alice"}, {"accounts", "bob"}});
//   if (auto both = pair.acquire(warden::Wait::up_to(5s))) {
//     transfer(alice, bob, 10, both.tokens());   // tokens in member order (see below)
//   }                                            // both released here
//
// The members are sorted into one global order — by group, then name, bytewise —
// whatever order they were given in, and acquired in that order one after the other (or
// all in one step, see below). Two multi-locks over the same locks, given in opposite
// orders, therefore take them in the same order and cannot deadlock each other (nor a
// third that shares some of their members). One Wait bounds
// the whole acquire: if it runs out or `stop` is requested, or a member's acquire throws,
// the members already taken are released before acquire() returns, so nothing is left
// held (a release the backend does not confirm is retried in the background, as a
// Lease's destructor does).
//
// Each member is acquired as Lock::acquire would acquire it for the calling thread: its
// own grant with its own fencing token, counted on the thread's existing hold of that
// lock if there is one (docs/contract.md's reentrancy rules, would_deadlock included).
// Every engine has multi-locks. Where Capabilities::atomic_multi says so (mem://, warden://), the
// backend grants all members in one step and the wait holds none of them; elsewhere, or
// when the thread already holds a member, the core takes them one by one in the order
// above. docs/primitives.md has the state table.
//
// acquire_async waits without a thread (warden/async.h): the members one by one in the
// same order, each an asynchronous acquire, on every engine (docs/async.md, MultiLock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "warden/async.h"
#include "warden/executor.h"
#include "warden/lease.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden {

namespace detail {
class ClientState;
class MultiAcquire;
}

// One member of a multi-lock: the lock (group, name) in `mode`.
struct LockSpec {
  std::string group;
  std::string name;
  Mode mode = Mode::exclusive;
};

// The members of a multi-lock, held together. Move-only; releases every member when
// destroyed. Lost as soon as any member is lost.
class MultiLease {
 public:
  MultiLease() noexcept = default;                     // empty: holds nothing
  MultiLease(MultiLease&& other) noexcept;             // leaves `other` empty
  MultiLease& operator=(MultiLease&& other) noexcept;  // releases what *this held first
  MultiLease(const MultiLease&) = delete;
  MultiLease& operator=(const MultiLease&) = delete;
  // Releases every member, the last acquired first, swallowing errors as ~Lease does.
  ~MultiLease();

  bool valid() const noexcept { return !leases_.empty(); }
  explicit operator bool() const noexcept { return valid(); }

  // The member leases in acquisition order (sorted by group, then name).
  const std::vector<Lease>& leases() const noexcept { return leases_; }
  // The members' fencing tokens in that order.
  std::vector<std::uint64_t> tokens() const;

  // Fires when the first member is lost (precondition: valid()).
  std::stop_token lost_token() const;
  bool lost() const;
  // Runs `callback` once when the first member is lost, on the watchdog's thread; at
  // once (on this thread) if one is lost already. Replaces an earlier callback.
  void on_lost(std::function<void()> callback);

  // Releases every member, the last acquired first, each as Lease::release() does.
  // Afterwards the MultiLease is empty. If the backend does not confirm some releases,
  // throws the first such Error after trying all of them; the members not confirmed
  // stay held in *this (renewals continue), so the caller may retry or drop it.
  void release();

  // Hands the member leases over (acquisition order), leaving *this empty: each then
  // lives, is lost and is released on its own.
  [[nodiscard]] std::vector<Lease> split() &&;

 private:
  friend class MultiLock;
  friend class detail::MultiAcquire;
  struct LossWatch;  // the first member's loss, told once
  explicit MultiLease(std::vector<Lease> leases);
  void require_valid() const;

  std::vector<Lease> leases_;
  std::shared_ptr<LossWatch> loss_;
};

class MultiLock {
 public:
  // The members in acquisition order (sorted by group, then name).
  const std::vector<LockSpec>& members() const noexcept { return members_; }
  const LockOptions& options() const noexcept { return options_; }

  // Acquires every member in acquisition order, waiting as `wait` says (one deadline for
  // all of them), giving up early when `stop` is requested. Returns an empty MultiLease
  // if the wait ran out or was cancelled; the members taken by then are released first.
  // Throws Error as Lock::acquire does for any member (would_deadlock, unsupported,
  // unavailable / deadline_exceeded, permission_denied), after releasing the members
  // taken by then.
  [[nodiscard]] MultiLease acquire(Wait wait = Wait::forever(), std::stop_token stop = {});

  // The same acquire without blocking (warden/async.h): `done` is told exactly once, on
  // the Client's completion thread or `executor`, with the members held, an empty
  // MultiLease (the wait ran out or was cancelled: the members taken by then released),
  // or the Error (the members taken by then released). The members are taken one by one
  // in acquisition order, each an asynchronous acquire of its own (never counted on a
  // thread's hold), even where the engine could take them in one step: the wait holds
  // the members taken so far. Bad input (a mode the engine lacks) is thrown here.
  using AcquireCallback = std::function<void(std::exception_ptr error, MultiLease lease)>;
  AcquireHandle acquire_async(Wait wait, AcquireCallback done, Executor executor = {});

  // The same acquire for a coroutine: `co_await multi.acquire_co(Wait::up_to(2s))` gives
  // the MultiLease (empty when the wait ran out) or throws the Error, resuming on the
  // Client's completion thread or `executor`; destroying the awaiting coroutine cancels
  // the wait and releases the members taken. Bad input is thrown here, not at co_await.
  [[nodiscard]] BasicAcquireAwaitable<MultiLease> acquire_co(Wait wait = Wait::forever(),
                                                             Executor executor = {});

 private:
  friend class Client;
  MultiLock(std::shared_ptr<detail::ClientState> client, std::vector<LockSpec> members,
            LockOptions options);
  // Every member in one step on the backend (Capabilities::atomic_multi).
  MultiLease acquire_together(Clock::time_point deadline, std::stop_token stop);

  std::shared_ptr<detail::ClientState> client_;
  std::vector<LockSpec> members_;
  LockOptions options_;
};

}  // namespace warden
