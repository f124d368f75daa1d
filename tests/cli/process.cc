#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

extern char** environ;

namespace warden::cli::testing {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

int shell_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

void check(int err, const char* what) {
  if (err != 0) throw std::runtime_error(std::string(what) + ": " + std::strerror(err));
}

}  // namespace

Process::Process(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    check(errno, "pipe2");
  }
  posix_spawn_file_actions_t actions;
  check(posix_spawn_file_actions_init(&actions), "file actions");
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  // The test runner may block signals in its threads; the child starts clean.
  posix_spawnattr_t attr;
  check(posix_spawnattr_init(&attr), "spawnattr");
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  int err = posix_spawn(&pid_, c_argv[0], &actions, &attr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
  fcntl(out_fd_, F_SETFL, O_NONBLOCK);
  fcntl(err_fd_, F_SETFL, O_NONBLOCK);
  started_ = std::chrono::steady_clock::now();
  check(err, "posix_spawn");
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(out_fd_);
  close(err_fd_);
}

void Process::drain(int fd, std::string& into, bool& open) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) open = false;
    return;  // EOF, or EAGAIN: nothing more for now
  }
}

Outcome Process::finish(std::chrono::milliseconds timeout) {
  Outcome outcome;
  auto deadline = started_ + timeout;
  bool out_open = true;
  bool err_open = true;
  int wait_status = 0;
  for (;;) {
    pid_t r = waitpid(pid_, &wait_status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      outcome.timed_out = true;
      kill(pid_, SIGKILL);
      waitpid(pid_, &wait_status, 0);
      reaped_ = true;
      break;
    }
    // Short polls: the exit of the process, not EOF, ends the wait.
    pollfd fds[2] = {{out_open ? out_fd_ : -1, POLLIN, 0}, {err_open ? err_fd_ : -1, POLLIN, 0}};
    poll(fds, 2, 10);
    if (out_open) drain(out_fd_, outcome.out, out_open);
    if (err_open) drain(err_fd_, outcome.err, err_open);
  }
  if (out_open) drain(out_fd_, outcome.out, out_open);
  if (err_open) drain(err_fd_, outcome.err, err_open);
  outcome.status = shell_status(wait_status);
  outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started_);
  return outcome;
}

Outcome run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            std::chrono::milliseconds timeout) {
  Process process(argv, env);
  return process.finish(timeout);
}

std::vector<std::string> environment(const std::vector<std::string>& drop,
                                     const std::vector<std::string>& add) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view key = entry.substr(0, entry.find('='));
    bool dropped = false;
    for (const std::string& d : drop) dropped = dropped || d == key;
    if (!dropped) out.emplace_back(entry);
  }
  out.insert(out.end(), add.begin(), add.end());
  return out;
}

}  // namespace warden::cli::testing
