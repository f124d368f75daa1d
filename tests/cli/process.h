// cli/process.h — runs the built `warden` binary in end-to-end tests, bounded in time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace warden::cli::testing {

struct Outcome {
  int status = -1;  // shell-style: exit code, or 128+N if killed by signal N
  std::string out;  // everything written to stdout
  std::string err;  // everything written to stderr
  std::chrono::milliseconds elapsed{0};
  bool timed_out = false;  // the test killed it (SIGKILL) at its deadline
};

// One child process with stdin from /dev/null and stdout/stderr captured.
class Process {
 public:
  // Starts argv with exactly the environment `env` ("KEY=value" entries).
  Process(const std::vector<std::string>& argv, const std::vector<std::string>& env);
  // Kills and reaps the process if finish() was not called.
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }

  // Collects output until the process exits; after `timeout` it is killed with SIGKILL
  // and the outcome says timed_out. Output a grandchild writes after the process
  // exited is not waited for (it may hold the pipes open indefinitely).
  Outcome finish(std::chrono::milliseconds timeout);

 private:
  void drain(int fd, std::string& into, bool& open);
  pid_t pid_ = -1;
  bool reaped_ = false;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::chrono::steady_clock::time_point started_;
};

// Runs argv to completion (see Process::finish).
Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            std::chrono::milliseconds timeout = std::chrono::seconds(30));

// true if `part` occurs in `text` (an outcome's out or err).
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// This process's environment without the variables named in `drop`, plus `add`
// ("KEY=value" entries).
std::vector<std::string> environment(const std::vector<std::string>& drop,
                                     const std::vector<std::string>& add = {});

}  // namespace warden::cli::testing
