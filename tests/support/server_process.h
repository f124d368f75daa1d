// support/server_process.h — throwaway backend processes for tests: a temp dir, a free
// loopback port, a child process started and stopped by PID, its output in a log file.
//
// Everything listens on 127.0.0.1 only. Destructors SIGKILL what is still running and
// remove the temp dir, so a failing test leaves nothing behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace warden::testing {

// A directory under $TMPDIR (or /tmp) removed with its contents on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "warden-test");
  // In memory (/dev/shm) when it has room, else as above: for a server that syncs its
  // every write (etcd 3.4 cannot be told not to), whose fsyncs behind a busy disk can
  // stall it for seconds on a loaded machine. A process killed with SIGKILL still finds
  // everything it wrote; only a crash of the machine would lose it, which no test makes.
  struct InMemory {};
  TempDir(const std::string& prefix, InMemory);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A TCP port on 127.0.0.1 that was free a moment ago, below the kernel's ephemeral range
// and reserved for this process (server_process.cc): a server restarted on it finds it
// free again. Something outside the tests could still take it before the caller binds;
// callers that start a server on it wait for readiness and retry on failure.
std::uint16_t free_port();

// Two free ports side by side, reserved as free_port() reserves one: the first is
// returned (a wardend cell member's, whose bus takes the next).
std::uint16_t free_port_pair();

// true once something accepts TCP connections on 127.0.0.1:port, false after `timeout`.
bool wait_for_port(std::uint16_t port, std::chrono::milliseconds timeout);

// The text of a file under /proc, "" if it cannot be read. A process that ends between
// the open and the read makes read(2) fail (ESRCH), and libstdc++'s filebuf throws from
// an istreambuf_iterator on a failed read whatever the stream's exception mask: in a
// fixture's destructor, that ended a whole test process.
std::string read_proc_file(const std::filesystem::path& path) noexcept;

// One child process, its stdout and stderr appended to `log`.
class ServerProcess {
 public:
  ServerProcess() = default;
  ServerProcess(std::vector<std::string> argv, std::filesystem::path log);
  ~ServerProcess();  // SIGKILL and reap if still running
  ServerProcess(ServerProcess&& other) noexcept;
  ServerProcess& operator=(ServerProcess&& other) noexcept;
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts (again) with the same argv. Throws std::runtime_error if it cannot spawn.
  void start();
  pid_t pid() const { return pid_; }
  // The command it runs, to start the same server from elsewhere (a nemesis that
  // restarts it after a kill -9).
  const std::vector<std::string>& argv() const { return argv_; }
  bool running();  // reaps the child if it exited
  // Sends `sig` (SIGSTOP/SIGCONT leave it running).
  void signal(int sig) const;
  // Sends `sig` to the process and to every process it started that runs now, as a
  // server that forks its workers (PostgreSQL) is frozen or thawed as a whole.
  void signal_family(int sig) const;
  // Sends `sig` and waits up to `timeout` for the exit, then SIGKILLs. Returns the
  // shell-style status (exit code or 128+signal), -1 if it was not running.
  int stop(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // kill -9 and reap.
  void kill9() { stop(9); }
  // kill -9 of the process and of every process it started, as a crash of its machine
  // ends a server that forks its workers (PostgreSQL) whole: frozen first, so that none
  // forks or goes meanwhile; the process itself is reaped.
  void kill9_family();
  // Waits up to `timeout` for the process to end by itself and reaps it: its shell-style
  // status, or -1 if it was not running or still runs (it is then left running).
  int wait_exit(std::chrono::milliseconds timeout);
  // Waits until `text` appears in what this run wrote to the log (false after `timeout`
  // or if the process ends). A restart appends to the same log, and the line a waiter
  // waits for ("listening on") is already there from the run before: it must not count.
  bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout);
  // The whole log, every run's.
  std::string log_text() const;
  const std::filesystem::path& log() const { return log_; }

 private:
  std::vector<std::string> argv_;
  std::filesystem::path log_;
  std::size_t run_starts_at_ = 0;  // the log's size when this run was started
  pid_t pid_ = -1;
};

// wardend on a free loopback port with its own data dir (kept across restarts).
class Wardend {
 public:
  explicit Wardend(std::vector<std::string> extra_args = {});
  // Starts (or restarts) the server; throws std::runtime_error if it does not come up.
  void start();
  std::uint16_t port() const { return port_; }
  std::string uri() const { return "warden://127.0.0.1:" + std::to_string(port_); }
  const std::filesystem::path& data_dir() const { return data_dir_; }
  ServerProcess& process() { return process_; }

 private:
  TempDir dir_;
  std::filesystem::path data_dir_;
  std::uint16_t port_ = 0;
  std::vector<std::string> extra_args_;
  ServerProcess process_;
};

// Path of the wardend binary under test.
std::string wardend_path();

}  // namespace warden::testing
