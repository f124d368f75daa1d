// warden/lock.h — one named lock, and a family of them.
//
// Lock satisfies the standard TimedLockable and SharedTimedLockable requirements, so
// std::unique_lock, std::shared_lock and std::scoped_lock work with it:
//
//   warden::Lock order = client.lock("orders", "order-42");
//   {
//     std::unique_lock guard(order);         // blocks until granted
//     ...
//   }                                        // released here
//
// The Lockable calls keep their counts per (Client, thread, lock), exactly like the
// explicit acquire() API, and mix freely with it. State table for one thread:
//
//   thread holds     lock()/acquire(excl)         lock_shared()/acquire(shared)
//   -------------    ---------------------------  ------------------------------
//   nothing          wait for an exclusive grant  wait for a shared grant
//   exclusive(n)     exclusive(n+1), no I/O       counted on the exclusive grant
//   shared(n)        throws Error(would_deadlock) shared(n+1), no I/O
//
// The backend grant is released when the thread's last count is released. Blocking
// calls (lock, lock_shared, acquire with Wait::forever) return only once granted or
// (acquire) cancelled; they throw warden::Error on a backend failure. A Lock object
// is cheap to copy and safe to use from many threads.
#pragma once

#include <chrono>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

#include "warden/async.h"
#include "warden/lease.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden {

namespace detail {
class ClientState;
}

class Lock {
 public:
  const std::string& group() const noexcept { return group_; }
  const std::string& name() const noexcept { return name_; }
  const LockOptions& options() const noexcept { return options_; }

  // Acquires one count in `mode`, waiting as `wait` says, giving up early when `stop`
  // is requested. Returns an empty Lease if the wait ran out or was cancelled — that
  // wait leaves no trace on the backend. A `stop` requested before the call returns an
  // empty Lease at once without asking the backend (a count this thread already holds
  // is still counted), as Java's lockInterruptibly() throws at once for an interrupted
  // thread: cancelled work must not wait for a slow or vanished backend. Throws Error: would_deadlock (shared held,
  // exclusive asked), unsupported (mode/fairness/lock-delay the engine lacks),
  // unavailable / deadline_exceeded (backend), permission_denied.
  [[nodiscard]] Lease acquire(Mode mode, Wait wait = Wait::forever(),
                              std::stop_token stop = {});

  // The same acquire without blocking (warden/async.h): `done` gets the outcome exactly
  // once, on the Client's completion thread or on `executor`. Not reentrant: every
  // asynchronous acquire is a grant of its own, never counted on a hold of the calling
  // thread (a thread that holds this lock and waits for it asynchronously waits for
  // itself), and its grant is not kept in the lock cache. Bad input (a mode, fairness or
  // lock-delay the engine lacks) throws Error at once, as acquire does; a backend's
  // failure goes to `done`.
  AcquireHandle acquire_async(Mode mode, Wait wait, AcquireCallback done, Executor executor = {});
  // acquire_async for `co_await`: resumes with the Lease (empty when the wait ran out),
  // or throws the Error, on the Client's completion thread or on `executor`.
  [[nodiscard]] AcquireAwaitable acquire_co(Mode mode, Wait wait = Wait::forever(),
                                            Executor executor = {});

  // TimedLockable (exclusive). unlock() never throws for a backend failure (it runs in
  // destructors); an unconfirmed release is retried in the background. unlock() by a
  // thread that holds no exclusive count throws Error(not_owner).
  void lock();
  bool try_lock();
  void unlock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return locked(acquire(Mode::exclusive, Wait::up_to(d)));
  }
  template <class C, class D>
  bool try_lock_until(const std::chrono::time_point<C, D>& t) {
    return locked(acquire(Mode::exclusive, Wait::until(to_steady(t))));
  }

  // SharedTimedLockable (shared); the same rules.
  void lock_shared();
  bool try_lock_shared();
  void unlock_shared();
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return locked(acquire(Mode::shared, Wait::up_to(d)));
  }
  template <class C, class D>
  bool try_lock_shared_until(const std::chrono::time_point<C, D>& t) {
    return locked(acquire(Mode::shared, Wait::until(to_steady(t))));
  }

  // The fencing token of the grant this thread holds, 0 if it holds none.
  std::uint64_t token() const;

 private:
  friend class Client;
  friend class Locks;
  Lock(std::shared_ptr<detail::ClientState> client, std::string group, std::string name,
       LockOptions options);

  // Keeps the count of a successful Lockable acquire parked in the thread's hold.
  bool locked(Lease lease);
  void unlock_mode(Mode mode);

  template <class C, class D>
  static Clock::time_point to_steady(const std::chrono::time_point<C, D>& t) {
    if constexpr (std::is_same_v<C, Clock>) {
      return std::chrono::time_point_cast<Clock::duration>(t);
    } else {
      auto left = t - C::now();
      return Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
    }
  }

  std::shared_ptr<detail::ClientState> client_;
  std::string group_;
  std::string name_;
  LockOptions options_;
};

// A family of fine-grained locks in one group that share options: one per order,
// per account, per file. Cheap to copy.
class Locks {
 public:
  const std::string& group() const noexcept { return group_; }
  // The lock for `name`. Throws Error(invalid_argument) for an invalid name.
  Lock get(std::string_view name) const;
  Lock operator[](std::string_view name) const { return get(name); }
  // Shorthand for get(name).acquire(mode, wait, stop).
  [[nodiscard]] Lease acquire(std::string_view name, Mode mode, Wait wait = Wait::forever(),
                              std::stop_token stop = {}) const;

 private:
  friend class Client;
  Locks(std::shared_ptr<detail::ClientState> client, std::string group, LockOptions options);
  std::shared_ptr<detail::ClientState> client_;
  std::string group_;
  LockOptions options_;
};

}  // namespace warden
