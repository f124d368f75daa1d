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
  bool running = false;                    // the loop has started and not ended; guarded by mu
  std::thread thread;                      // started by the first post; guarded by mu

  // The thread's loop: holds its own reference, so a CompletionThread destroyed by a
  // piece of work it runs leaves the queue alive until the loop ends.
  static void run(std::shared_ptr<Queue> queue) {
    std::unique_lock lock(queue->mu);
    while (true) {
      queue->ready.wait(lock, [&] { return !queue->work.empty() || queue->closing; });
      if (queue->work.empty()) {  // closing, and nothing left to run
        queue->running = false;
        return;
      }
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
    // A loop still running runs it, even one the destructor has taken to join: a piece of
    // work it runs may post more while the object is being destroyed.
    if (!queue_->running) {
      queue_->running = true;
      std::thread thread(&Queue::run, queue_);
      if (queue_->closing) {
        thread.detach();  // its loop has ended and been joined: nobody joins this one
      } else {
        queue_->thread = std::move(thread);
      }
    }
  }
  queue_->ready.notify_one();
}

}  // namespace warden::core
