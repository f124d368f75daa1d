// core/wait_inbox.h — what the one thread that drives an engine's asynchronous waits
// shares with the threads that ask, cancel and wake them: new waits, the ids of cancelled
// ones, the ids of ones to look again, and the thread's end. warden://'s wait channel
// and redis://'s async waits each drive one.
//
// `Wait` has `std::uint64_t id`, `core::AcquireRequest request`,
// `core::Engine::AcquireDone done`, and (its last member, so that it is deregistered
// first when the wait is destroyed) `std::optional<std::stop_callback<std::function<void()>>>
// on_stop`.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/engine.h"
#include "warden/error.h"

namespace warden::core {

template <class Wait>
class WaitInbox {
 public:
  // What the thread takes in one turn.
  struct Taken {
    std::vector<std::unique_ptr<Wait>> arrived;
    std::vector<std::uint64_t> cancelled;
    std::vector<std::uint64_t> woken;
  };

  // `what` names the engine for messages ("warden://"). Throws Error(resource_exhausted)
  // without a descriptor for the wake-up.
  explicit WaitInbox(std::string what)
      : what_(std::move(what)), wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (wake_fd_ < 0) {
      throw Error(Errc::resource_exhausted,
                  "no descriptor left for " + what_ + "'s asynchronous waits");
    }
  }
  // The waits must be gone first: their stop callbacks write to the descriptor.
  ~WaitInbox() {
    arrived_.clear();
    ::close(wake_fd_);
  }
  WaitInbox(const WaitInbox&) = delete;
  WaitInbox& operator=(const WaitInbox&) = delete;

  // Starts the thread that takes from this inbox, running `body`, detached: `body` holds
  // its owner, which may so outlive the engine when stop() runs on the thread itself.
  // Before any wait is submitted.
  void start(std::function<void()> body) {
    std::thread thread(std::move(body));
    thread_ = thread.get_id();
    thread.detach();
  }

  // From any thread: numbers `wait`, hooks its cancellation up, and queues it for the
  // thread; once stop() was called, tells it Error(unavailable) here instead.
  void submit(std::unique_ptr<Wait> wait) {
    {
      std::lock_guard guard(mu_);
      wait->id = ++next_id_;
    }
    const std::uint64_t id = wait->id;
    // A stop requested already runs this at once, and the thread finds the id queued.
    wait->on_stop.emplace(wait->request.stop, std::function<void()>([this, id] {
                            {
                              std::lock_guard guard(mu_);
                              cancelled_.push_back(id);
                            }
                            wake();
                          }));
    {
      std::lock_guard guard(mu_);
      if (!stopping_) {
        arrived_.push_back(std::move(wait));
        wait.reset();
      }
    }
    if (wait) {
      auto done = std::move(wait->done);
      wait.reset();
      done(std::nullopt, closing());
      return;
    }
    wake();
  }

  // From any thread (a subscriber's): the wait `id` is to look again.
  void notify(std::uint64_t id) {
    {
      std::lock_guard guard(mu_);
      woken_.push_back(id);
    }
    wake();
  }

  // From any thread: wakes the thread for work it keeps in queues of its own (zk://'s
  // answers from the C client).
  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto written = ::write(wake_fd_, &one, sizeof one);
  }

  // The thread ends after its turn; waits for that unless called on the thread itself
  // (from an outcome it is telling).
  void stop() {
    {
      std::lock_guard guard(mu_);
      stopping_ = true;
    }
    wake();
    if (on_thread()) return;
    std::unique_lock lock(mu_);
    ended_.wait(lock, [&] { return ended_flag_; });
  }
  // true on the thread that takes from this inbox.
  bool on_thread() const { return std::this_thread::get_id() == thread_; }
  bool stopping() const {
    std::lock_guard guard(mu_);
    return stopping_;
  }

  // The thread's: what arrived since the last take. The wake-up is taken before the work
  // it announces, so work queued after this wakes the next wait again.
  Taken take() {
    std::uint64_t count = 0;
    [[maybe_unused]] const auto drained = ::read(wake_fd_, &count, sizeof count);
    Taken taken;
    std::lock_guard guard(mu_);
    taken.arrived.swap(arrived_);
    taken.cancelled.swap(cancelled_);
    taken.woken.swap(woken_);
    return taken;
  }
  // Moves the waits that arrived into `waits` (the thread's map of ids to owned waits) and
  // returns their ids in the order they were submitted.
  template <class Waits>
  static std::vector<std::uint64_t> admit(Taken& taken, Waits& waits) {
    std::vector<std::uint64_t> ids;
    ids.reserve(taken.arrived.size());
    for (auto& wait : taken.arrived) {
      const std::uint64_t id = wait->id;
      ids.push_back(id);
      waits.emplace(id, std::move(wait));
    }
    taken.arrived.clear();
    return ids;
  }

  // Readable when there is something to take: the thread polls it with its connection.
  int wake_fd() const { return wake_fd_; }
  // Sleeps until `until` or something to take, for a thread without a connection.
  void sleep_until(Clock::time_point until) const {
    pollfd fd{wake_fd_, POLLIN, 0};
    const auto ms =
        until == Clock::time_point::max()
            ? -1
            : static_cast<int>(std::clamp<std::int64_t>(
                  std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count(), 0,
                  60'000));
    ::poll(&fd, 1, ms);
  }

  // The thread's last act: tells every wait in `waits` and every one still queued
  // Error(unavailable) and says it ended. `waits` maps ids to waits, as the thread keeps
  // them; a wait whose `done` is empty was told already.
  template <class Waits>
  void close(Waits& waits) {
    std::vector<std::unique_ptr<Wait>> left;
    {
      std::lock_guard guard(mu_);
      left.swap(arrived_);
    }
    for (auto& wait : left) {
      const std::uint64_t id = wait->id;
      waits.emplace(id, std::move(wait));
    }
    Waits all;
    all.swap(waits);
    const auto why = closing();
    for (auto& [id, wait] : all) {
      if (!wait->done) continue;
      auto done = std::move(wait->done);
      wait.reset();
      done(std::nullopt, why);
    }
    std::lock_guard guard(mu_);
    ended_flag_ = true;
    ended_.notify_all();
  }

 private:
  std::exception_ptr closing() const {
    return std::make_exception_ptr(Error(Errc::unavailable, "the " + what_ + " client is closing"));
  }
  const std::string what_;
  const int wake_fd_;
  std::thread::id thread_;

  mutable std::mutex mu_;
  std::condition_variable ended_;
  bool stopping_ = false;                       // guarded by mu_
  bool ended_flag_ = false;                     // guarded by mu_: the thread closed
  std::vector<std::unique_ptr<Wait>> arrived_;  // guarded by mu_
  std::vector<std::uint64_t> cancelled_;        // guarded by mu_
  std::vector<std::uint64_t> woken_;            // guarded by mu_
  std::uint64_t next_id_ = 0;                   // guarded by mu_
};

}  // namespace warden::core
