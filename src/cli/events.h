// cli/events.h — the one place where the supervising thread of `warden run` waits.
//
// It waits for three things at once: a signal sent to warden, a wake-up from another
// thread (the thread that acquires the lock, the lease-lost callback on the client's
// watchdog thread) and a deadline. Linux-specific (signalfd, eventfd).
//
// The constructor blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD in the calling
// thread. Threads started afterwards inherit that mask, so these signals reach only
// wait() and never interrupt a library call with EINTR or run a handler on a library
// thread. Construct Events before any other thread starts — in particular before
// Client::open, which starts the watchdog.
#pragma once

#include <signal.h>

#include <string>

#include "warden/types.h"

namespace warden::cli {

class Events {
 public:
  // Throws Failure(kInternal) if the descriptors cannot be created.
  Events();
  // Closes the descriptors. The mask stays: a signal still pending would otherwise
  // take its default action (kill warden) before the exit status is returned.
  ~Events();
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;

  struct Event {
    enum class Kind { signal, woken, timeout };
    Kind kind = Kind::timeout;
    int signal = 0;  // for Kind::signal: the signal number
    // For Kind::signal: true if a process sent it (kill(2)), false if the kernel did —
    // a terminal's ^C or hang-up, which goes to the whole foreground process group
    // and so has already reached CMD as well.
    bool sent_by_process = false;
  };

  // Blocks until a watched signal arrives, wake() is called, or `deadline` passes
  // (Clock::time_point::max(): no deadline). Reports one event per call; a signal
  // that arrived together with a wake-up is reported first, the wake-up next.
  // Wake-ups since the last Kind::woken collapse into one. Throws Failure(kInternal)
  // if waiting fails.
  Event wait(Clock::time_point deadline);

  // Makes a wait() return Kind::woken. Thread-safe; callable from any thread.
  void wake() noexcept;

  // The signal mask the calling thread had before construction: the mask CMD starts
  // with.
  const sigset_t& original_mask() const noexcept { return original_mask_; }

 private:
  sigset_t original_mask_;
  int signal_fd_ = -1;
  int wake_fd_ = -1;
};

// "SIGTERM", "SIGINT", ...; "signal N" for numbers without a name.
std::string signal_name(int signal);

}  // namespace warden::cli
