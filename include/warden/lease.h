// warden/lease.h — the move-only RAII handle of one acquired lock.
//
// A Lease is one count of a (client, thread, lock) hold: re-acquiring a lock the same
// thread already holds through the same Client returns another Lease on the same
// backend grant (same token); the grant is released on the backend when the last
// count is released. A Lease may be moved to and released from another thread.
//
// While held, the Client's watchdog renews the grant. If it cannot — the backend
// said the grant is gone, or it did not confirm a renewal before the lease could have
// expired — the lease is *lost*: lost_token() fires, the on_lost callback runs, and
// the lease is never renewed back. A lost lease still has to be released (a no-op on
// the backend) so that reentrancy counts stay right; its destructor does that.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "warden/executor.h"
#include "warden/sequencer.h"
#include "warden/types.h"

namespace warden {

namespace detail {
class AsyncAcquire;
class ClientState;
class Hold;
}  // namespace detail

class Lease {
 public:
  Lease() noexcept = default;  // empty: holds nothing
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;  // releases what *this held first
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  // Releases (see release()), swallowing errors: a release the backend does not
  // confirm is retried in the background until it is confirmed or the lease has
  // certainly expired.
  ~Lease();

  // true while this Lease holds a count (also after the lease was lost).
  bool valid() const noexcept { return hold_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }

  // Precondition for the accessors below: valid().
  Mode mode() const;              // the mode this count was acquired in
  std::uint32_t permits() const;  // of a semaphore's grant; 0 for a lock's
  std::uint64_t token() const;    // fencing token of the backend grant
  // Which hold of the grant this is: 0 for the one the backend granted, n for the n-th
  // re-acquire from the client's lock cache (LockOptions::cache), whose token is the
  // same. A resource fenced by (token, reuse) rejects a write delayed from before an
  // unlock() once a later hold wrote (FenceGate, Sequencer).
  std::uint64_t reuse() const;
  // "group/name:mode:token" of the backend grant, "…:token+reuse" for a hold from the cache
  Sequencer sequencer() const;
  const std::string& group() const;
  const std::string& name() const;

  // Fires when the lease is lost, on the watchdog's thread. Never fires for a lease
  // released normally.
  std::stop_token lost_token() const;
  // true once the lease is lost: also from the instant its deadline passed, before the
  // watchdog's thread (which may be late) has fired lost_token() and run on_lost.
  bool lost() const;
  // Runs `callback` once when the lease is lost, on the watchdog's thread; at once
  // (on this thread) if it is already lost. Replaces an earlier callback. The callback
  // must not block for long: it delays the renewal of every other lease of the Client.
  void on_lost(std::function<void()> callback);

  // Releases this count; on the last count of the hold, releases the grant on the
  // backend and waits for confirmation, also a cached lock's (LockOptions::cache: only
  // unlock() and a dropped Lease keep it cached). Afterwards the Lease is empty. Idempotent: on
  // an empty Lease it does nothing. Releasing a lost lease succeeds without I/O.
  // Throws Error(unavailable / deadline_exceeded) if the backend did not confirm; the
  // Lease then stays valid and still held (renewals continue), so the caller may
  // retry or drop it.
  void release();

  // The same release without blocking: the Lease is empty at once, and `done` is called
  // once the backend has confirmed it (nullptr), or with the Error it failed with — then
  // the grant is released in the background until the backend confirms it or its lease
  // ends, as a dropped Lease's is. On the Client's completion thread, or `executor`
  // (warden/executor.h). A count that is not the hold's last and a lost lease are told
  // nullptr without I/O; an empty Lease too, at once (on `executor` if named, else on the
  // calling thread: it has no Client). Throws Error(invalid_argument) for an empty
  // `done`, and changes nothing then.
  using ReleaseCallback = std::function<void(std::exception_ptr error)>;
  void release_async(ReleaseCallback done, Executor executor = {});

 private:
  friend class Election;
  friend class Lock;
  friend class detail::AsyncAcquire;
  friend class MultiLock;
  friend class Semaphore;
  Lease(std::shared_ptr<detail::ClientState> client, std::shared_ptr<detail::Hold> hold,
        Mode mode) noexcept;
  void require_valid() const;
  void drop() noexcept;                          // releases without reporting
  std::shared_ptr<detail::ClientState> client_;  // keeps the engine and watchdog alive
  std::shared_ptr<detail::Hold> hold_;
  Mode mode_ = Mode::exclusive;
};

}  // namespace warden
