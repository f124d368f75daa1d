// cli/child.h — CMD, the child process `warden run` supervises.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace warden::cli {

class Child {
 public:
  // Starts argv[0] (searched in PATH unless it holds a '/') with argv and the
  // environment `env` ("KEY=value" entries), its signal mask set to `mask`, and
  // warden's stdin, stdout and stderr. Throws Failure: kNotFound if argv[0] does not
  // exist, kCannotExecute if it exists but cannot be run (permission, format).
  // Precondition: !argv.empty().
  static Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     const sigset_t& mask);

  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // A child still running here is left behind by an error: it is killed (SIGKILL) and
  // reaped, so that it never runs on without the lock warden held for it.
  ~Child();

  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return !status_.has_value(); }

  // Sends `signal` to CMD. Does nothing once CMD has been reaped.
  void signal(int signal) const noexcept;

  // Reaps CMD if it has exited, without blocking. Returns its shell-style status
  // (see exit_status()) once it has exited, nullopt while it runs.
  std::optional<int> try_reap();

 private:
  explicit Child(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// A waitpid(2) status as a shell reports it: the exit code, or 128+N for a process
// killed by signal N.
int exit_status(int wait_status) noexcept;

// `base` ("KEY=value" entries, e.g. from environ) with every entry for a key in
// `overrides` replaced by the override, which is appended.
std::vector<std::string> environment_with(const std::vector<std::string>& base,
                                          const std::vector<std::string>& overrides);

// The process's environment as "KEY=value" entries.
std::vector<std::string> current_environment();

}  // namespace warden::cli
