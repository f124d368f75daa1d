// server/server_command.h — the command line of the lock server, shared by the
// `wardend` binary and `warden server`.
#pragma once

#include <CLI/CLI.hpp>

#include "server/server.h"

namespace warden::server {

// Adds wardend's options to `app`, writing into `options`.
void add_server_options(CLI::App& app, ServerOptions& options);
// Starts the server and runs it until SIGINT/SIGTERM. Prints "wardend listening on
// HOST:PORT" on stdout once it accepts connections. Returns a process exit code.
int run_server(const ServerOptions& options);

}  // namespace warden::server
