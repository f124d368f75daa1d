// cli/run_command.h — `warden run`: hold a lock while a command runs.
//
//   warden run --url URL --group G --name N [--name N2 ...] [options] -- CMD [ARGS...]
//
// Like flock(1), `etcdctl lock` and `consul lock`: acquire (group, name), run CMD with
// the grant's fencing token and sequencer in its environment, keep the lease renewed
// while CMD runs, release when CMD exits and exit with CMD's status. With --permits N,
// (group, name) is a semaphore of N permits and CMD runs holding one of them, so at
// most N such commands run at once. See exit_codes.h for the statuses warden adds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/supervise.h"

namespace warden::cli {

// The options as given on the command line, before validation.
struct RunOptions {
  std::string url;  // empty: $WARDEN_URL
  std::string group;
  std::vector<std::string> names;  // more than one: a multi-lock over the group's names
  bool shared = false;
  std::uint32_t permits = 0;  // > 0: take one permit of a semaphore of this many
  std::string wait;           // empty: forever
  std::string ttl = "30s";
  std::string lock_delay = "0s";
  std::string fairness = "automatic";  // automatic, fifo or non-fair
  bool unfair = false;                 // shorthand for --fairness non-fair
  bool verbose = false;                // say on stderr what was granted, and how
  bool no_renew = false;
  std::string on_lost = "term";  // term, kill or ignore
  std::string kill_after = "5s";
  std::vector<std::string> command;
};

// Validates `options`, acquires the lock, runs CMD and returns the exit status.
// Throws Failure for everything that keeps CMD from running to completion under the
// lock (bad input before any I/O, backend errors, timeout, interruption).
int run(const RunOptions& options);

// Registers `warden run`.
void add_run_command(Commands& commands);

}  // namespace warden::cli
