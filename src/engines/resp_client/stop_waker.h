// engines/resp_client/stop_waker.h — a file descriptor that becomes readable when a
// std::stop_token is signalled, so a thread blocked in poll(2) on a socket wakes up at
// once on cancellation instead of noticing it at its next time slice.
//
// The eventfds are kept per thread and reused (drained when a stop made one readable):
// a blocking acquire makes one StopWaker per call, and creating and closing an eventfd
// each time cost two system calls per lock cycle (docs/performance.md). A thread keeps
// as many as it had StopWakers alive at once (usually one) until it exits.
#pragma once

#include <optional>
#include <stop_token>

namespace warden::engines::resp_client {

class StopWaker {
 public:
  // fd() is -1 for a token that can never be signalled (no need to wake), and also if
  // the eventfd cannot be created (descriptor limit): callers then look at the token
  // in short slices.
  explicit StopWaker(const std::stop_token& stop);
  ~StopWaker();
  StopWaker(const StopWaker&) = delete;
  StopWaker& operator=(const StopWaker&) = delete;

  // Readable once stop was requested (also if it was before construction); -1 if none.
  int fd() const { return fd_; }

 private:
  struct Notify {
    int fd;
    void operator()() const noexcept;
  };

  std::stop_token stop_;
  int fd_ = -1;
  // Declared last: destroyed (deregistered) first, before fd_ goes back to the thread.
  std::optional<std::stop_callback<Notify>> callback_;
};

}  // namespace warden::engines::resp_client
