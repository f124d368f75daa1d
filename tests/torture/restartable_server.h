// torture/restartable_server.h — a test server that `warden torture` may kill and start
// again (the kill-server and restart-server nemeses): its --server-restart command is a
// shell script that starts the server's command in the background, waits until a
// readiness command succeeds (starting it again if it exited first) and prints its PID.
//
// The torture command must not target a child of the test process: the test is blocked
// reading the command's output, never reaps a killed child, and the nemesis waits for the
// killed PID to vanish. So the test stops its fixture's own process and starts the server
// through the script, whose processes are orphans reaped by init.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/server_process.h"

namespace warden::testing {

class RestartableServer {
 public:
  // `argv` and `log` as the fixture's ServerProcess has them; `ready` is a shell command
  // that succeeds once the server answers.
  RestartableServer(const std::vector<std::string>& argv, const std::filesystem::path& log,
                    const std::string& ready);
  ~RestartableServer();  // kill -9 every process the script started
  RestartableServer(const RestartableServer&) = delete;
  RestartableServer& operator=(const RestartableServer&) = delete;

  // Runs the script; returns the PID of the server that came up. Throws
  // std::runtime_error if none did.
  pid_t start() const;
  // The script's path: the --server-restart command.
  std::string command() const { return script_.string(); }

 private:
  TempDir dir_;
  std::filesystem::path script_;
  std::filesystem::path pids_;
};

}  // namespace warden::testing
