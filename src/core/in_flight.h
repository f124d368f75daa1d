// core/in_flight.h — counts what an engine has under way and must see ended before it
// closes: calls sent and not yet answered (releases sent without waiting,
// Engine::release_async, so that settle_releases() can wait for them), or objects a
// client library's thread still holds (etcd://'s gRPC calls, which must be gone before
// the channels they hold are).
#pragma once

#include <condition_variable>
#include <mutex>

namespace warden::core {

class InFlight {
 public:
  void begin() {
    std::lock_guard lock(mu_);
    ++count_;
  }
  void end() {
    // Notified under the lock: a waiter that finds the count at zero may destroy this
    // at once, and must not find notify_all still to come.
    std::lock_guard lock(mu_);
    --count_;
    idle_.notify_all();
  }
  // Blocks until every call begun has ended. Callers rely on the backend's client
  // library to answer every call it took, in time (with an error, at the latest).
  void wait_idle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return count_ == 0; });
  }

  // One count, from its construction to its destruction: a member declared first in an
  // object is destroyed last, so the count ends once the rest of the object is gone.
  class Token {
   public:
    explicit Token(InFlight& counter) : counter_(counter) { counter_.begin(); }
    ~Token() { counter_.end(); }
    Token(const Token&) = delete;
    Token& operator=(const Token&) = delete;

   private:
    InFlight& counter_;
  };

 private:
  std::mutex mu_;
  std::condition_variable idle_;
  int count_ = 0;  // guarded by mu_
};

}  // namespace warden::core
