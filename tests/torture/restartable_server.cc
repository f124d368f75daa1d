#include "torture/restartable_server.h"

#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace warden::testing {
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

RestartableServer::RestartableServer(const std::vector<std::string>& argv,
                                     const std::filesystem::path& log, const std::string& ready)
    : dir_("warden-torture-restart"), script_(dir_.path() / "start"), pids_(dir_.path() / "pids") {
  std::string command;
  for (const auto& arg : argv) command += shell_quote(arg) + ' ';
  // Every PID started is recorded before anything else, so the destructor stops a
  // server even if the script is killed while it waits. A PostgreSQL started right
  // after its postmaster's kill -9 exits at once while the old backends still hold the
  // shared memory; the loop starts it again until one stays up.
  std::ofstream out(script_);
  out << "#!/usr/bin/env bash\n"
      << "for try in $(seq 1 100); do\n"
      << "  " << command << ">>" << shell_quote(log.string()) << " 2>&1 </dev/null &\n"
      << "  pid=$!\n"
      << "  echo \"$pid\" >>" << shell_quote(pids_.string()) << "\n"
      << "  for wait in $(seq 1 600); do\n"
      << "    kill -0 \"$pid\" 2>/dev/null || break\n"
      << "    if " << ready << " >/dev/null 2>&1; then echo \"$pid\"; exit 0; fi\n"
      << "    sleep 0.1\n"
      << "  done\n"
      << "  kill -KILL \"$pid\" 2>/dev/null\n"
      << "  sleep 0.2\n"
      << "done\n"
      << "exit 1\n";
  out.close();
  ::chmod(script_.c_str(), 0755);
}

RestartableServer::~RestartableServer() {
  std::ifstream in(pids_);
  long pid = 0;
  while (in >> pid) {
    if (pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
}

pid_t RestartableServer::start() const {
  FILE* out = ::popen(script_.c_str(), "r");
  if (out == nullptr) throw std::runtime_error("cannot run " + script_.string());
  long pid = -1;
  if (std::fscanf(out, "%ld", &pid) != 1) pid = -1;
  ::pclose(out);
  if (pid <= 0) throw std::runtime_error("the server did not come up: " + script_.string());
  return static_cast<pid_t>(pid);
}

}  // namespace warden::testing
