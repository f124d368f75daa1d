#include "support/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

extern char** environ;

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::filesystem::path make_temp_dir(const std::string& base, const std::string& prefix) {
  std::string pattern = base + "/" + prefix + "-XXXXXX";
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  return pattern;
}

std::string temp_base() {
  const char* base = std::getenv("TMPDIR");
  return base && *base ? base : "/tmp";
}

}  // namespace

TempDir::TempDir(const std::string& prefix) : path_(make_temp_dir(temp_base(), prefix)) {}

TempDir::TempDir(const std::string& prefix, InMemory) {
  constexpr std::uintmax_t kRoom = 2ULL << 30;  // well beyond a few servers' data
  std::error_code error;
  const auto space = std::filesystem::space("/dev/shm", error);
  path_ = make_temp_dir(!error && space.available >= kRoom ? "/dev/shm" : temp_base(), prefix);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {

// The start of the kernel's ephemeral range: from there on, the ports it gives to
// bind(0) and to every outgoing connection's local end.
int ephemeral_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  in >> low;
  return low;
}

bool bindable(std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr = loopback(port);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

std::uint16_t kernels_choice() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// Ports this process has reserved: an flock'd file per port in a directory every test
// process shares, held open so no other test process picks the port while its server is
// down between a stop and a restart. The oldest reservations are let go past a bound,
// well beyond the servers one test keeps.
class PortReservations {
 public:
  bool reserve(std::uint16_t port) {
    std::lock_guard guard(mu_);
    std::error_code ignored;
    std::filesystem::create_directories(dir_, ignored);
    const std::string path = (dir_ / std::to_string(port)).string();
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {  // another test process's (or this one's)
      close(fd);
      return false;
    }
    held_.push_back(fd);
    if (held_.size() > kMaxHeld) {
      close(held_.front());
      held_.pop_front();
    }
    return true;
  }

 private:
  static constexpr std::size_t kMaxHeld = 256;
  const std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("warden-test-ports-" + std::to_string(getuid()));
  std::mutex mu_;
  std::deque<int> held_;
};

}  // namespace

namespace {

// One per process, shared by free_port() and free_port_pair().
PortReservations& port_reservations() {
  static PortReservations reservations;
  return reservations;
}

std::mt19937& port_random() {
  static std::mt19937 random(std::random_device{}());
  return random;
}

}  // namespace

std::uint16_t free_port() {
  // Below the ephemeral range, so that neither bind(0) nor an outgoing connection's
  // local end (thousands of them in a test run) takes the port while a test's server is
  // down for a restart; reserved, so that no other test process picks it meanwhile.
  PortReservations& reservations = port_reservations();
  std::mt19937& random = port_random();
  const int low = 10000;
  const int high = std::min(ephemeral_low(), 65536) - 1;
  if (high - low >= 1000) {
    std::uniform_int_distribution<int> pick(low, high);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const auto port = static_cast<std::uint16_t>(pick(random));
      if (reservations.reserve(port) && bindable(port)) return port;
    }
  }
  return kernels_choice();
}

std::uint16_t free_port_pair() {
  PortReservations& reservations = port_reservations();
  std::mt19937& random = port_random();
  const int low = 10000;
  const int high = std::min(ephemeral_low(), 65536) - 2;
  if (high - low < 1000) throw std::runtime_error("no port range below the ephemeral one");
  std::uniform_int_distribution<int> pick(low, high);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(random));
    const auto next = static_cast<std::uint16_t>(port + 1);
    if (reservations.reserve(port) && reservations.reserve(next) && bindable(port) &&
        bindable(next)) {
      return port;
    }
  }
  throw std::runtime_error("no two free ports side by side");
}

bool wait_for_port(std::uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(port);
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

ServerProcess::ServerProcess(std::vector<std::string> argv, std::filesystem::path log)
    : argv_(std::move(argv)), log_(std::move(log)) {}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) kill9();
}

ServerProcess::ServerProcess(ServerProcess&& other) noexcept
    : argv_(std::move(other.argv_)), log_(std::move(other.log_)), pid_(other.pid_) {
  other.pid_ = -1;
}

ServerProcess& ServerProcess::operator=(ServerProcess&& other) noexcept {
  if (this != &other) {
    if (pid_ > 0) kill9();
    argv_ = std::move(other.argv_);
    log_ = std::move(other.log_);
    pid_ = other.pid_;
    other.pid_ = -1;
  }
  return *this;
}

void ServerProcess::start() {
  if (pid_ > 0 && running()) throw std::runtime_error("already running: " + argv_.at(0));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::error_code ec;
  const auto size = std::filesystem::file_size(log_, ec);
  run_starts_at_ = ec ? 0 : static_cast<std::size_t>(size);
  std::vector<char*> args;
  for (auto& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv_[0]);
  pid_ = pid;
}

bool ServerProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

std::string read_proc_file(const std::filesystem::path& path) noexcept {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      text.clear();
      break;
    }
    try {
      text.append(buffer, static_cast<std::size_t>(n));
    } catch (...) {
      text.clear();
      break;
    }
  }
  ::close(fd);
  return text;
}

namespace {

// Whether every thread of `pid` is stopped ('T' or 't' in /proc/PID/task/TID/stat); a
// process that is gone counts as stopped.
bool all_threads_stopped(pid_t pid) {
  std::error_code ec;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& entry : std::filesystem::directory_iterator(tasks, ec)) {
    const std::string text = read_proc_file(entry.path() / "stat");
    const auto paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size()) continue;  // just ended
    const char state = text[paren + 2];
    if (state != 'T' && state != 't') return false;
  }
  return true;
}

// SIGSTOP is delivered to each thread as it next runs: on a loaded machine a server can
// go on answering for a moment after kill(2) returned. A freeze is in place only once
// every thread has stopped (bounded: a process that cannot stop is not waited for).
void wait_until_stopped(pid_t pid) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!all_threads_stopped(pid) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

void ServerProcess::signal(int sig) const {
  if (pid_ <= 0) return;
  ::kill(pid_, sig);
  if (sig == SIGSTOP) wait_until_stopped(pid_);
}

namespace {

// The children of every process in `parents`, from /proc/PID/stat's fourth field.
std::vector<pid_t> children_of(const std::vector<pid_t>& parents) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string text = read_proc_file(entry.path() / "stat");
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 2));
    std::string state;
    pid_t parent = 0;
    if (!(fields >> state >> parent)) continue;
    for (pid_t p : parents) {
      if (p == parent) children.push_back(static_cast<pid_t>(std::stoi(name)));
    }
  }
  return children;
}

}  // namespace

void ServerProcess::signal_family(int sig) const {
  if (pid_ <= 0) return;
  // The parent first: a stopped postmaster forks no new worker meanwhile.
  std::vector<pid_t> generation{pid_};
  while (!generation.empty()) {
    for (pid_t p : generation) ::kill(p, sig);
    if (sig == SIGSTOP) {
      for (pid_t p : generation) wait_until_stopped(p);
    }
    generation = children_of(generation);
  }
}

void ServerProcess::kill9_family() {
  if (pid_ <= 0) return;
  signal_family(SIGSTOP);
  std::vector<pid_t> descendants;
  for (auto generation = children_of({pid_}); !generation.empty();
       generation = children_of(generation)) {
    descendants.insert(descendants.end(), generation.begin(), generation.end());
  }
  for (pid_t p : descendants) ::kill(p, SIGKILL);
  kill9();
}

int ServerProcess::stop(int sig, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGCONT);  // a stopped process cannot act on SIGTERM
  ::kill(pid_, sig);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || r < 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
  pid_ = -1;
  return shell_status(status);
}

int ServerProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || r < 0) break;
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(5ms);
  }
  pid_ = -1;
  return shell_status(status);
}

bool ServerProcess::wait_for_log(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto this_run_wrote = [&] {
    return log_text().find(text, run_starts_at_) != std::string::npos;
  };
  while (std::chrono::steady_clock::now() < deadline) {
    if (this_run_wrote()) return true;
    if (!running()) return this_run_wrote();
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::string ServerProcess::log_text() const {
  std::ifstream in(log_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string wardend_path() { return WARDEN_WARDEND_PATH; }

Wardend::Wardend(std::vector<std::string> extra_args)
    : dir_("wardend"), data_dir_(dir_.path() / "data"), extra_args_(std::move(extra_args)) {
  start();
}

void Wardend::start() {
  // The port stays the same across restarts, so clients reconnect to the same address.
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (port_ == 0 || attempt > 0) port_ = free_port();
    std::vector<std::string> argv = {wardend_path(), "--listen",
                                     "127.0.0.1:" + std::to_string(port_), "--data-dir",
                                     data_dir_.string()};
    argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
    process_ = ServerProcess(argv, dir_.path() / "wardend.log");
    process_.start();
    if (process_.wait_for_log("listening on", 10s) && wait_for_port(port_, 5s)) return;
    process_.kill9();
  }
  throw std::runtime_error("wardend did not start; log:\n" + process_.log_text());
}

}  // namespace warden::testing
