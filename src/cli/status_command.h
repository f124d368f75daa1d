// cli/status_command.h — `warden status`: what a lock backend says about one lock, a
// group's locks, or (wardend) itself.
//
//   warden status --url URL --group G --name N [--json]      one lock: holders, waiters
//   warden status --url URL --group G [--json]               the group's locks
//   warden status --url warden://H:P [--json]                server INFO
//
// Every engine answers the first two through Client::inspect / Client::list.
#pragma once

#include <optional>
#include <string>

#include "cli/commands.h"

namespace warden::cli {

// The options as given on the command line, before validation.
struct StatusOptions {
  std::string url;  // empty: $WARDEN_URL
  std::string group;
  std::optional<std::string> name;  // given (maybe empty: an error) or not
  bool json = false;
};

// Validates `options` (Failure(kUsage) before any I/O), asks the backend and prints
// the answer on stdout. Returns 0; throws Failure for anything else (69 unreachable,
// 77 refused credentials, 71 an unexpected reply).
int status(const StatusOptions& options);

// Registers `warden status`.
void add_status_command(Commands& commands);

}  // namespace warden::cli
