// cli/acquire.h — acquiring the lock while staying responsive to signals.
#pragma once

#include <string>

#include "cli/events.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/types.h"

namespace warden::cli {

// Acquires one count of `lock` in `mode`, waiting as `wait` says. The library call runs
// on a helper thread; this thread watches `events`, and SIGINT, SIGTERM, SIGHUP or
// SIGQUIT cancel the wait (through its stop_token, so it leaves no trace on the
// backend). Returns the lease. Throws Failure: kTimeout with `timeout_why` if the lock
// was not granted in time; 128+N if signal N ended the wait; the library's error,
// classified by exit_code_for(), otherwise.
Lease acquire_interruptibly(Lock& lock, Mode mode, Wait wait, const std::string& timeout_why,
                            Events& events);

}  // namespace warden::cli
