// cli/leader_command.h — `warden leader`: who leads an election, once or as it changes.
//
//   warden leader --url URL --group G --name N [--json]           the leader now
//   warden leader --url URL --group G --name N --watch [--json]   every change, until
//                                                                 SIGINT or SIGTERM
//
// The read side of `warden elect`, through Election::leader and Election::observe.
#pragma once

#include <string>

#include "cli/commands.h"

namespace warden::cli {

// The options as given on the command line, before validation.
struct LeaderOptions {
  std::string url;  // empty: $WARDEN_URL
  std::string group;
  std::string name;
  bool watch = false;
  bool json = false;
};

// Validates `options` (Failure(kUsage) before any I/O) and prints the leader, or "no
// leader", on stdout: once, or with --watch at once and then on every change until
// SIGINT or SIGTERM. Returns 0 (also when nobody leads, and when a watch is stopped by
// SIGINT or SIGTERM); throws Failure for anything else (64 an engine without elections,
// 69 unreachable, 77 refused credentials, 128+N stopped by SIGHUP or SIGQUIT).
int leader(const LeaderOptions& options);

// Registers `warden leader`.
void add_leader_command(Commands& commands);

}  // namespace warden::cli
