// core/in_flight.h — counts an engine's calls sent and not yet answered (releases sent
// without waiting, Engine::release_async), so that settle_releases() can wait for them.
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
    {
      std::lock_guard lock(mu_);
      --count_;
    }
    idle_.notify_all();
  }
  // Blocks until every call begun has ended. Callers rely on the backend's client
  // library to answer every call it took, in time (with an error, at the latest).
  void wait_idle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable idle_;
  int count_ = 0;  // guarded by mu_
};

}  // namespace warden::core
