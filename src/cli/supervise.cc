#include "cli/supervise.h"

#include <signal.h>

#include <algorithm>
#include <list>
#include <optional>
#include <stop_token>
#include <string>

#include "cli/duration.h"
#include "cli/exit_codes.h"
#include "cli/failure.h"

namespace warden::cli {
namespace {

std::string describe(const Lease& lease) {
  return printable(lease.group() + '/' + lease.name()) + " (token " +
         std::to_string(lease.token()) + ")";
}

// The lost leases, described ("G/A (token 7), G/B (token 9)").
std::string describe_lost(std::span<const Lease> leases) {
  std::string text;
  for (const Lease& lease : leases) {
    if (!lease.lost()) continue;
    if (!text.empty()) text += ", ";
    text += describe(lease);
  }
  return text;
}

bool any_lost(std::span<const Lease> leases) {
  return std::ranges::any_of(leases, [](const Lease& lease) { return lease.lost(); });
}

}  // namespace

int supervise(Child& child, std::span<const Lease> leases, Events& events,
              const LostPolicy& policy) {
  bool lost = false;
  // When CMD is sent SIGKILL if SIGTERM did not end it (OnLost::term).
  std::optional<Clock::time_point> kill_at;

  auto on_lost = [&] {
    lost = true;
    std::string line =
        "lease on " + describe_lost(leases) + " lost: " + policy.meaning + "; ";
    switch (policy.action) {
      case OnLost::term:
        line += "sending SIGTERM to CMD (SIGKILL in " + format_duration(policy.kill_after) + ")";
        print_diagnostic(line);
        child.signal(SIGTERM);
        kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(policy.kill_after);
        break;
      case OnLost::kill:
        print_diagnostic(line + "sending SIGKILL to CMD");
        child.signal(SIGKILL);
        break;
      case OnLost::ignore:
        print_diagnostic(line + "CMD keeps running (--on-lost ignore)");
        break;
    }
  };

  // The lease may have been lost between acquire and spawn; on_lost's wake-up is then
  // pending too, but handling it here keeps the order obvious.
  if (any_lost(leases)) on_lost();

  for (;;) {
    Events::Event event = events.wait(kill_at.value_or(Clock::time_point::max()));
    switch (event.kind) {
      case Events::Event::Kind::signal:
        if (event.signal == SIGCHLD) {
          if (std::optional<int> status = child.try_reap()) {
            // A loss reported just as CMD exited still counts: CMD ran unprotected.
            if (!lost && any_lost(leases)) lost = true;
            if (!lost) return *status;
            print_diagnostic("CMD exited with status " + std::to_string(*status) +
                             " after the lease on " + describe_lost(leases) + " was lost");
            return exit_code::kLeaseLost;
          }
        } else if (event.sent_by_process) {
          child.signal(event.signal);
        }
        break;
      case Events::Event::Kind::woken:
        if (!lost && any_lost(leases)) on_lost();
        break;
      case Events::Event::Kind::timeout:
        break;
    }
    // Checked after every event, not only on a timeout, so that a stream of signals
    // cannot postpone the SIGKILL.
    if (kill_at && Clock::now() >= *kill_at) {
      kill_at.reset();
      print_diagnostic("CMD still running " + format_duration(policy.kill_after) +
                       " after SIGTERM; sending SIGKILL");
      child.signal(SIGKILL);
    }
  }
}

int run_supervised(const std::vector<std::string>& command, std::span<const Lease> leases,
                   Events& events, const LostPolicy& policy) {
  // Through the lost tokens rather than Lease::on_lost, which needs a mutable Lease: a
  // Leadership lends its lease out only as const. A callback runs at once if the lease
  // is lost already; supervise() looks at every lease first thing anyway.
  auto wake = [&events] { events.wake(); };
  std::list<std::stop_callback<decltype(wake)>> wake_on_loss;  // stop_callback cannot move
  for (const Lease& lease : leases) wake_on_loss.emplace_back(lease.lost_token(), wake);
  const std::vector<std::string> env =
      environment_with(current_environment(), grant_environment(leases));
  Child child = Child::spawn(command, env, events.original_mask());
  return supervise(child, leases, events, policy);
}

std::vector<std::string> grant_environment(std::span<const Lease> leases) {
  std::string tokens;
  std::string sequencers;
  for (const Lease& lease : leases) {
    if (!tokens.empty()) tokens += ',';
    if (!sequencers.empty()) sequencers += ' ';
    tokens += std::to_string(lease.token());
    sequencers += lease.sequencer().str();
  }
  return {"WARDEN_TOKEN=" + tokens, "WARDEN_SEQUENCER=" + sequencers};
}

}  // namespace warden::cli
