// cli/supervise.h — holding the lock while CMD runs.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "cli/child.h"
#include "cli/events.h"
#include "warden/lease.h"

namespace warden::cli {

// What happens to CMD when its lease is lost.
enum class OnLost {
  term,    // SIGTERM now, SIGKILL after LostPolicy::kill_after if CMD still runs
  kill,    // SIGKILL now
  ignore,  // CMD runs on; warden only warns
};

struct LostPolicy {
  OnLost action = OnLost::term;
  std::chrono::nanoseconds kill_after = std::chrono::seconds(5);  // for OnLost::term
  // What a lost lease means, for the message: "another process may hold the lock now".
  std::string meaning = "another process may hold the lock now";
};

// Waits until CMD has exited and returns its shell-style status, or kLeaseLost if one
// of `leases` (one lock's, or a multi-lock's members) was lost at any point before CMD
// exited (whatever CMD's status: CMD may have
// overlapped another holder). Meanwhile it passes signals sent to warden (SIGINT,
// SIGTERM, SIGHUP, SIGQUIT) on to CMD, except those the kernel sent to the whole
// foreground process group (a terminal's ^C), which CMD has received already; and it
// acts on a loss as `policy` says, printing one line on stderr.
//
// Preconditions: each lease calls events.wake() when lost (Lease::on_lost), and CMD was
// started after `events` began watching signals, so its exit is not missed.
int supervise(Child& child, std::span<const Lease> leases, Events& events,
              const LostPolicy& policy);

// What `warden run` and `warden elect` do once granted: starts `command` with
// WARDEN_TOKEN and WARDEN_SEQUENCER set from `leases` (see grant_environment), wakes
// `events` when one of them is lost, and supervises CMD until it exits. Returns
// supervise()'s status. The caller keeps the leases (and releases them afterwards).
// Throws Failure: kNotFound / kCannotExecute if CMD cannot start.
// Precondition: `events` was constructed before the leases' Client was opened.
int run_supervised(const std::vector<std::string>& command, std::span<const Lease> leases,
                   Events& events, const LostPolicy& policy);

// WARDEN_TOKEN and WARDEN_SEQUENCER: one lease's, or a multi-lock's members' in name
// order (tokens comma-separated, sequencers space-separated).
std::vector<std::string> grant_environment(std::span<const Lease> leases);

}  // namespace warden::cli
