// core/multi_acquire.h — one MultiLock::acquire_async under way: the members taken one
// by one in acquisition order, each an asynchronous acquire of its own, and the outcome
// handed to the caller exactly once.
//
// Each member's outcome arrives on the Client's completion thread, which asks for the
// next member there: no thread waits. A member that runs out, is cancelled or fails ends
// the whole acquire, and the members taken by then are released (the last taken first).
// cancel() cancels the member under way; a cancel that comes once every member is taken
// but before the callback starts releases them all, as a single acquire's cancel does.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/told_once.h"
#include "warden/async.h"
#include "warden/multi_lock.h"

namespace warden::detail {

class AsyncAcquire;
class ClientState;

class MultiAcquire : public PendingAcquire, public std::enable_shared_from_this<MultiAcquire> {
 public:
  MultiAcquire(std::shared_ptr<ClientState> client, std::vector<LockSpec> members,
               LockOptions options, Clock::time_point deadline,
               MultiLock::AcquireCallback callback, Executor executor);

  // Asks for the first member.
  void start();
  void cancel() override;
  bool started() const override { return outcome_.started(); }

 private:
  void ask(std::size_t member);
  void told(std::size_t member, std::exception_ptr error, Lease lease);
  // The outcome, once: every member held (granted) or none (the taken ones released).
  void finish(std::exception_ptr error, bool granted);

  const std::shared_ptr<ClientState> client_;
  const std::vector<LockSpec> members_;
  const LockOptions options_;
  const Clock::time_point deadline_;
  ToldOnce<MultiLease> outcome_;

  std::mutex mu_;
  std::shared_ptr<AsyncAcquire> current_;  // guarded by mu_: the member being asked for
  std::size_t current_member_ = 0;         // guarded by mu_: current_'s index
  std::vector<Lease> taken_;  // the members' outcomes arrive one at a time: no lock
  std::atomic<bool> finished_{false};
};

}  // namespace warden::detail
