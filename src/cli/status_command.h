// cli/status_command.h — `warden status`: what a lock server says about itself or one
// lock.
//
//   warden status --url warden://H:P [--json]                        server INFO
//   warden status --url warden://H:P --group G --name N [--json]     INSPECT G/N
//
// warden:// only for now: other engines have no status query yet and get a usage
// error (exit 64). Listing every lock of a group is not in wardend's protocol yet.
#pragma once

#include <string>

#include "cli/commands.h"

namespace warden::cli {

// The options as given on the command line, before validation.
struct StatusOptions {
  std::string url;  // empty: $WARDEN_URL
  std::string group;
  std::string name;
  bool json = false;
};

// Validates `options` (Failure(kUsage) before any I/O), asks the server and prints
// the answer on stdout. Returns 0; throws Failure for anything else (69 unreachable,
// 77 refused credentials, 71 an unexpected reply).
int status(const StatusOptions& options);

// Registers `warden status`.
void add_status_command(Commands& commands);

}  // namespace warden::cli
