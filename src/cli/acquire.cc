#include "cli/acquire.h"

#include <atomic>
#include <exception>
#include <stop_token>
#include <thread>

#include "cli/exit_codes.h"
#include "cli/failure.h"
#include "warden/error.h"

namespace warden::cli {

Lease acquire_interruptibly(Lock& lock, Mode mode, Wait wait, const std::string& timeout_why,
                            Events& events) {
  return acquire_interruptibly(
      "acquire " + printable(lock.group() + '/' + lock.name()),
      [&](std::stop_token stop) { return lock.acquire(mode, wait, std::move(stop)); },
      timeout_why, events);
}

Lease acquire_interruptibly(const std::string& what,
                            const std::function<Lease(std::stop_token)>& acquire,
                            const std::string& timeout_why, Events& events) {
  // Declared before the worker, so a lease granted just as a signal arrived is
  // released (by its destructor) only after the worker has been joined.
  Lease lease;
  std::exception_ptr error;
  std::atomic<bool> done{false};
  {
    std::jthread worker([&](std::stop_token stop) {
      try {
        lease = acquire(stop);
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
  if (!lease) throw Failure(exit_code::kTimeout, what, timeout_why);
  return lease;
}

}  // namespace warden::cli
