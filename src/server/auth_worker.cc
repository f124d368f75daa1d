#include "server/auth_worker.h"

#include <sodium.h>

#include "server/password_hash.h"

namespace warden::server {

AuthWorker::AuthWorker(std::size_t threads, Done done) : done_(std::move(done)) {
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

AuthWorker::~AuthWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& job : jobs_) sodium_memzero(job.password.data(), job.password.size());
    jobs_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void AuthWorker::submit(std::uint64_t id, std::string hash, std::string password) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(Job{id, std::move(hash), std::move(password)});
  }
  wake_.notify_one();
}

void AuthWorker::loop() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const bool matched = verify_password(job.hash, job.password);
    // The password is not kept in freed memory longer than the check needs it.
    sodium_memzero(job.password.data(), job.password.size());
    done_(job.id, matched);
  }
}

}  // namespace warden::server
