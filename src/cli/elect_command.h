// cli/elect_command.h — `warden elect`: run a command while this process leads an election.
//
//   warden elect --url URL --group G --name N [--value V] [options] -- CMD [ARGS...]
//
// Like `warden run` for one exclusive lock, but the grant is a leadership
// (warden/election.h): it carries a value that `warden leader` shows to everyone, and
// its fencing token is the leader's term, in CMD's environment as WARDEN_TOKEN. The
// leadership is held (renewed, never resigned) while CMD runs and resigned when CMD
// exits; warden then exits with CMD's status. See exit_codes.h for warden's own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace warden::cli {

// The options as given on the command line, before validation.
struct ElectOptions {
  std::string url;  // empty: $WARDEN_URL
  std::string group;
  std::string name;
  std::optional<std::string> value;  // nullopt: default_leader_value()
  std::string wait;                  // empty: forever
  std::string ttl = "30s";
  std::string on_lost = "term";  // term, kill or ignore
  std::string kill_after = "5s";
  bool verbose = false;  // say on stderr what was won: term, value, TTL
  std::vector<std::string> command;
};

// "<host name>:<pid of warden>": tells the other candidates and `warden leader` which
// machine and process leads, without configuration.
std::string default_leader_value();

// Validates `options`, campaigns, runs CMD as the leader, resigns, and returns CMD's
// status. Throws Failure for everything that keeps CMD from running to completion as
// the leader (bad input before any I/O, an engine without elections, backend errors,
// timeout, interruption).
int elect(const ElectOptions& options);

// Registers `warden elect`.
void add_elect_command(Commands& commands);

}  // namespace warden::cli
