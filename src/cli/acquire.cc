#include "cli/acquire.h"

#include <atomic>
#include <exception>
#include <stop_token>
#include <thread>

#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "warden/error.h"

namespace warden::cli {

std::vector<Lease> acquire_interruptibly(Lock& lock, Mode mode, Wait wait,
                                         const std::string& timeout_why, Events& events) {
  return acquire_leases_interruptibly(
      "acquire " + printable(lock.group() + '/' + lock.name()),
      [&](std::stop_token stop) {
        std::vector<Lease> leases;
        if (Lease lease = lock.acquire(mode, wait, std::move(stop))) {
          leases.push_back(std::move(lease));
        }
        return leases;
      },
      timeout_why, events);
}

std::vector<Lease> acquire_leases_interruptibly(
    const std::string& what, const std::function<std::vector<Lease>(std::stop_token)>& acquire,
    const std::string& timeout_why, Events& events) {
  std::vector<Lease> leases;
  acquire_interruptibly(
      what,
      [&](std::stop_token stop) {
        leases = acquire(std::move(stop));
        return !leases.empty();
      },
      timeout_why, events);
  return leases;
}

void acquire_interruptibly(const std::string& what,
                           const std::function<bool(std::stop_token)>& acquire,
                           const std::string& timeout_why, Events& events) {
  bool granted = false;
  std::exception_ptr error;
  std::atomic<bool> done{false};
  {
    std::jthread worker([&](std::stop_token stop) {
      try {
        granted = acquire(stop);
      } catch (...) {
        error = std::current_exception();
      }
      done = true;
      events.wake();
    });
    for (;;) {
      Events::Event event = events.wait(Clock::time_point::max());
      if (event.kind == Events::Event::Kind::signal && event.signal != SIGCHLD) {
        worker.request_stop();
        worker.join();
        throw Failure(exit_code::kSignalBase + event.signal, what,
                      "interrupted by " + signal_name(event.signal));
      }
      if (event.kind == Events::Event::Kind::woken && done) break;
    }
  }
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      throw Failure::from(what, e);
    }
  }
  if (!granted) throw Failure(exit_code::kTimeout, what, timeout_why);
}

}  // namespace warden::cli
