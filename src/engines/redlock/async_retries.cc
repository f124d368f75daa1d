#include "engines/redlock/async_retries.h"

#include <thread>

namespace warden::engines::redlock {

struct AsyncRetries::Wait {
  Wait(core::AcquireRequest r, Attempt a, core::Engine::AcquireDone d)
      : request(std::move(r)), attempt(std::move(a)), done(std::move(d)) {}

  std::uint64_t id = 0;
  core::AcquireRequest request;
  Attempt attempt;
  core::Engine::AcquireDone done;
  bool waits = false;  // its deadline is ahead: it ends there, not after its retries
  std::exception_ptr at_deadline;
  std::optional<Clock::time_point> timer;
  std::optional<Clock::time_point> deadline_timer;  // the deadline's, while it waits
  // Last: deregistered first when the wait is destroyed (core/wait_inbox.h).
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

std::shared_ptr<AsyncRetries> AsyncRetries::start() {
  std::shared_ptr<AsyncRetries> retries(new AsyncRetries);
  // The thread holds the object: it may outlive the engine when stop() runs on it.
  retries->inbox_.start([retries] { retries->run(); });
  return retries;
}

AsyncRetries::AsyncRetries() : inbox_("redlock://") {}

AsyncRetries::~AsyncRetries() = default;

void AsyncRetries::acquire(core::AcquireRequest request, Attempt attempt,
                           core::Engine::AcquireDone done) {
  inbox_.submit(std::make_unique<Wait>(std::move(request), std::move(attempt), std::move(done)));
}

void AsyncRetries::stop() { inbox_.stop(); }

void AsyncRetries::run() {
  while (!inbox_.stopping()) turn();
  timers_.clear();
  deadlines_.clear();
  inbox_.close(waits_);
}

void AsyncRetries::turn() {
  auto taken = inbox_.take();
  const auto now = Clock::now();
  for (auto& wait : taken.arrived) {
    Wait& w = *wait;
    w.waits = w.request.deadline > now;
    if (w.waits) deadlines_.set(w.deadline_timer, w.id, w.request.deadline);
    schedule(w, now);
    const std::uint64_t id = w.id;
    waits_.emplace(id, std::move(wait));
  }
  // What ended between two attempts is told before the next one: a cancel, a deadline.
  // Each tell may take the last reference to the Client (the engine) with it: nothing
  // more once stopping.
  for (const std::uint64_t id : taken.cancelled) {
    if (const auto it = waits_.find(id); it != waits_.end()) tell(it, std::nullopt, nullptr);
    if (inbox_.stopping()) return;
  }
  while (const auto id = deadlines_.due(Clock::now())) {
    const auto it = waits_.find(*id);
    tell(it, std::nullopt, it->second->at_deadline);
    if (inbox_.stopping()) return;
  }
  if (const auto id = timers_.due(Clock::now())) {
    attempt(waits_.find(*id));
    return;  // the next turn tells what ended meanwhile, then makes the next attempt
  }
  inbox_.sleep_until(std::min(timers_.next(), deadlines_.next()));
}

void AsyncRetries::attempt(Waits::iterator it) {
  Wait& w = *it->second;
  schedule(w, std::nullopt);
  Step step;
  try {
    step = w.attempt(w.request);
  } catch (...) {
    tell(it, std::nullopt, std::current_exception());
    return;
  }
  if (step.granted) {
    tell(it, std::move(step.granted), nullptr);
  } else if (step.again && !w.request.stop.stop_requested()) {
    w.at_deadline = step.at_deadline;
    schedule(w, step.again);
  } else {
    tell(it, std::nullopt, nullptr);
  }
}

void AsyncRetries::tell(Waits::iterator it, std::optional<core::Granted> granted,
                        std::exception_ptr error) {
  Wait& w = *it->second;
  schedule(w, std::nullopt);
  deadlines_.set(w.deadline_timer, w.id, std::nullopt);
  core::tell_and_forget(waits_, it, std::move(granted), error);
}

void AsyncRetries::schedule(Wait& w, std::optional<Clock::time_point> at) {
  timers_.set(w.timer, w.id, at);
}

}  // namespace warden::engines::redlock
