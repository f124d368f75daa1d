#include "core/background_releases.h"

#include <exception>

namespace warden::core {

BackgroundReleases::BackgroundReleases(std::function<void(const GrantRef&)> release)
    : release_(std::move(release)) {}

BackgroundReleases::~BackgroundReleases() {
  settle();
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

void BackgroundReleases::post(const GrantRef& grant, Engine::ReleaseDone done) {
  posted_.begin();
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) {
      thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
    }
    queue_.emplace_back(grant, std::move(done));
  }
  work_.notify_one();
}

void BackgroundReleases::settle() { posted_.wait_idle(); }

void BackgroundReleases::run(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (true) {
    work_.wait(lock, stop, [&] { return !queue_.empty(); });
    if (queue_.empty()) return;  // stopped, with nothing left
    auto [grant, done] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      release_(grant);
    } catch (...) {
      error = std::current_exception();
    }
    done(error);
    posted_.end();
    lock.lock();
  }
}

}  // namespace warden::core
