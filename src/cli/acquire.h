// cli/acquire.h — acquiring the lock while staying responsive to signals.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <vector>

#include "cli/events.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/types.h"

namespace warden::cli {

// Runs `acquire` (a library call that waits, cancelled through its stop_token; it keeps
// what it was granted where the caller can see it and returns whether anything was
// granted) on a helper thread while this thread watches `events`: SIGINT, SIGTERM,
// SIGHUP or SIGQUIT cancel the wait, so it leaves no trace on the backend. `what` names
// the call in errors ("acquire G/N"). Returns once something was granted. Throws
// Failure: kTimeout with `timeout_why` if nothing was granted in time; 128+N if signal N
// ended the wait; the library's error, classified by exit_code_for(), otherwise.
//
// What `acquire` keeps must outlive this call: a grant that came just as a signal
// arrived is then released by its owner's destructor, after the helper thread is joined.
void acquire_interruptibly(const std::string& what,
                           const std::function<bool(std::stop_token)>& acquire,
                           const std::string& timeout_why, Events& events);

// The same for a call that returns the leases granted (none if the wait ran out).
// Returns the leases.
std::vector<Lease> acquire_leases_interruptibly(
    const std::string& what, const std::function<std::vector<Lease>(std::stop_token)>& acquire,
    const std::string& timeout_why, Events& events);

// The same for one count of `lock` in `mode`, waiting as `wait` says: one lease.
std::vector<Lease> acquire_interruptibly(Lock& lock, Mode mode, Wait wait,
                                         const std::string& timeout_why, Events& events);

}  // namespace warden::cli
