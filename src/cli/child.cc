#include "cli/child.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "cli/exit_codes.h"
#include "cli/failure.h"

extern char** environ;

namespace warden::cli {
namespace {

std::string_view key_of(std::string_view entry) { return entry.substr(0, entry.find('=')); }

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

// posix_spawnp rather than fork+execvp: warden is multithreaded by the time CMD starts
// (the client's watchdog), and only async-signal-safe calls may run between fork and
// exec; posix_spawn does the mask and the exec for us and reports an exec failure
// (errno) to the parent directly, where fork+exec needs a close-on-exec pipe for it.
Child Child::spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   const sigset_t& mask) {
  posix_spawnattr_t attr;
  if (int err = posix_spawnattr_init(&attr); err != 0) {
    throw Failure(exit_code::kInternal, "spawn", std::strerror(err));
  }
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  pid_t pid = -1;
  int err = posix_spawnp(&pid, c_argv[0], nullptr, &attr, c_argv.data(), c_env.data());
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    int code = err == ENOENT ? exit_code::kNotFound : exit_code::kCannotExecute;
    throw Failure(code, printable(argv[0]), std::strerror(err));
  }
  return Child(pid);
}

Child::Child(Child&& other) noexcept : pid_(other.pid_), status_(other.status_) {
  other.pid_ = -1;
  other.status_ = 0;
}

Child::~Child() {
  if (pid_ <= 0 || status_.has_value()) return;
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void Child::signal(int signal) const noexcept {
  // Only before reaping: afterwards the pid may belong to another process.
  if (pid_ > 0 && !status_.has_value()) kill(pid_, signal);
}

std::optional<int> Child::try_reap() {
  if (status_.has_value()) return status_;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) status_ = exit_status(status);
  // ECHILD: nobody else reaps our children, so this cannot happen; never wait forever.
  if (r < 0 && errno == ECHILD) status_ = exit_code::kInternal;
  return status_;
}

int exit_status(int wait_status) noexcept {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return exit_code::kSignalBase + WTERMSIG(wait_status);
  return exit_code::kInternal;
}

std::vector<std::string> environment_with(const std::vector<std::string>& base,
                                          const std::vector<std::string>& overrides) {
  std::vector<std::string> out;
  out.reserve(base.size() + overrides.size());
  for (const std::string& entry : base) {
    bool overridden = false;
    for (const std::string& o : overrides) overridden = overridden || key_of(o) == key_of(entry);
    if (!overridden) out.push_back(entry);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

}  // namespace warden::cli
