#include "core/completion_thread.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace warden::core {

struct CompletionThread::Queue {
  std::mutex mu;
  std::condition_variable ready;
  std::deque<std::function<void()>> work;  // guarded by mu
  bool closing = false;                    // guarded by mu
  std::thread thread;                      // started by the first post; guarded by mu

  // The thread's loop: holds its own reference, so a CompletionThread destroyed by a
  // piece of work it runs leaves the queue alive until the loop ends.
  static void run(std::shared_ptr<Queue> queue) {
    std::unique_lock lock(queue->mu);
    while (true) {
      queue->ready.wait(lock, [&] { return !queue->work.empty() || queue->closing; });
      if (queue->work.empty()) return;  // closing, and nothing left to run
      auto next = std::move(queue->work.front());
      queue->work.pop_front();
      lock.unlock();
      try {
        next();
      } catch (...) {
        // Nobody to report to (CompletionThread::post says so).
      }
      next = nullptr;  // what it captured goes here, outside the lock
      lock.lock();
    }
  }
};

CompletionThread::CompletionThread() : queue_(std::make_shared<Queue>()) {}

CompletionThread::~CompletionThread() {
  std::thread thread;
  {
    std::lock_guard guard(queue_->mu);
    queue_->closing = true;
    thread.swap(queue_->thread);
  }
  queue_->ready.notify_all();
  if (!thread.joinable()) return;
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();  // destroyed by its own work: the loop ends by itself
  } else {
    thread.join();
  }
}

void CompletionThread::post(std::function<void()> work) {
  {
    std::lock_guard guard(queue_->mu);
    queue_->work.push_back(std::move(work));
    if (!queue_->thread.joinable()) queue_->thread = std::thread(&Queue::run, queue_);
  }
  queue_->ready.notify_one();
}

}  // namespace warden::core
