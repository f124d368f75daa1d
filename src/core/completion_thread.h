// core/completion_thread.h — the thread a Client runs asynchronous acquires' outcomes
// on (warden/async.h): one per Client, started by the first piece of work, running
// every piece in the order posted.
//
// Its queue and thread outlive the object when the object is destroyed on that thread
// (a callback dropped the last Lease of a Client): the thread then finishes what is
// queued on its own and ends. Work that running work posts while the object is being
// destroyed on another thread runs on the same thread, before the destructor returns.
#pragma once

#include <functional>
#include <memory>

namespace warden::core {

class CompletionThread {
 public:
  CompletionThread();
  // Runs what is still queued, then ends the thread.
  ~CompletionThread();
  CompletionThread(const CompletionThread&) = delete;
  CompletionThread& operator=(const CompletionThread&) = delete;

  // Runs `work` on the thread, after everything posted before it. An exception it
  // throws is dropped. Never runs `work` on the calling thread.
  void post(std::function<void()> work);

 private:
  struct Queue;
  std::shared_ptr<Queue> queue_;
};

}  // namespace warden::core
