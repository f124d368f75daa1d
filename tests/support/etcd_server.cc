#include "support/etcd_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

extern char** environ;

namespace warden::testing {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// Hard bound on one etcdctl run, whatever its own timeouts do.
constexpr auto kEtcdctlLimit = 30s;
// How long a member (or the whole cluster) may take to answer after it was started.
constexpr auto kStartLimit = 30s;
// How long leader() waits for an election to end.
constexpr auto kElectionLimit = 5s;
constexpr int kStartAttempts = 3;
constexpr int kRestartAttempts = 5;
constexpr const char* kPortTaken = "address already in use";
// Logged once the member serves clients (after it joined the cluster): "serving client
// traffic insecurely" or "... securely".
constexpr const char* kServingClients = "serving client traffic ";

std::string find_on_path(const std::string& name) {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "/usr/bin/" + name;
}

std::string url(std::uint16_t port) { return "http://127.0.0.1:" + std::to_string(port); }
std::string tls_url(std::uint16_t port) { return "https://127.0.0.1:" + std::to_string(port); }

// For the userinfo part of a URI: everything but the unreserved characters %-escaped.
std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// The last `lines` lines of `text`.
std::string tail(const std::string& text, int lines) {
  std::size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int n = 0; n < lines && pos > 0; ++n) {
    const auto nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return pos == 0 ? text : text.substr(pos + 1);
}

// The digits of the JSON number after "name": in `text`; empty if there is none. etcd's
// JSON holds 64-bit IDs as plain numbers, too large for a double, so they stay text.
std::string json_number(std::string_view text, std::string_view name) {
  const std::string key = "\"" + std::string(name) + "\":";
  const auto at = text.find(key);
  if (at == std::string_view::npos) return {};
  std::size_t end = at + key.size();
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
  return std::string(text.substr(at + key.size(), end - at - key.size()));
}

std::string base64_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned bits = 0;
  int count = 0;
  for (const char c : text) {
    const int v = value(c);
    if (v < 0) break;  // '=' padding
    bits = (bits << 6) | static_cast<unsigned>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>((bits >> count) & 0xFF);
    }
  }
  return out;
}

struct Output {
  int status = -1;  // shell-style: exit code or 128+signal
  std::string out;
  std::string err;
};

// Runs argv with stdin from /dev/null, our environment minus ETCDCTL_* plus
// ETCDCTL_API=3, and collects stdout and stderr; SIGKILLs it after `limit`.
Output run_process(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    if (std::string_view(*e).starts_with("ETCDCTL_")) continue;
    env.emplace_back(*e);
  }
  env.emplace_back("ETCDCTL_API=3");
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args_copy = argv;
  std::vector<char*> args;
  for (auto& a : args_copy) args.push_back(a.data());
  args.push_back(nullptr);

  std::array<int, 2> out_pipe{-1, -1};
  std::array<int, 2> err_pipe{-1, -1};
  if (pipe2(out_pipe.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  if (pipe2(err_pipe.data(), O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  // A clean signal state, whatever the test thread blocks or ignores.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw std::runtime_error("cannot start " + argv.at(0) + ": " + std::strerror(rc));
  }

  Output result;
  std::array<pollfd, 2> fds{pollfd{out_pipe[0], POLLIN, 0}, pollfd{err_pipe[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  const auto deadline = SteadyClock::now() + limit;
  bool timed_out = false;
  char buffer[4096];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left <= 0ms) {
      timed_out = true;
      break;
    }
    const int ready =
        poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left.count(), 100)));
    if (ready < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.status = 128 + WTERMSIG(status);
  if (timed_out) {
    result.err += "\n(killed after " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
                  " s)";
  }
  return result;
}

}  // namespace

std::string etcd_path() { return find_on_path("etcd"); }
std::string etcdctl_path() { return find_on_path("etcdctl"); }

EtcdCluster::EtcdCluster(EtcdOptions options, EtcdTls tls)
    : options_(std::move(options)), tls_(std::move(tls)), dir_("etcd", TempDir::InMemory{}) {
  start_cluster();
}

EtcdCluster::EtcdCluster(EtcdOptions options)
    : options_(std::move(options)), dir_("etcd", TempDir::InMemory{}) {
  start_cluster();
}

void EtcdCluster::start_cluster() {
  if (options_.members < 1) throw std::invalid_argument("EtcdCluster needs at least 1 member");
  if (options_.root_password && options_.root_password->empty()) {
    throw std::invalid_argument("EtcdCluster: root_password must not be empty");
  }
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    if (start_all(attempt)) {
      if (options_.root_password) enable_auth();
      return;
    }
  }
  throw std::runtime_error("etcd members could not bind their ports in " +
                           std::to_string(kStartAttempts) + " attempts; logs:\n" + log_tails());
}

EtcdCluster::~EtcdCluster() {
  for (auto& m : members_) m.process.kill9();
}

EtcdCluster::Member& EtcdCluster::at(int member) {
  if (member < 0 || member >= size()) {
    throw std::out_of_range("no etcd member " + std::to_string(member));
  }
  return members_[static_cast<std::size_t>(member)];
}

const EtcdCluster::Member& EtcdCluster::at(int member) const {
  if (member < 0 || member >= size()) {
    throw std::out_of_range("no etcd member " + std::to_string(member));
  }
  return members_[static_cast<std::size_t>(member)];
}

bool EtcdCluster::start_all(int attempt) {
  for (auto& m : members_) m.process.kill9();
  members_.clear();
  const int n = options_.members;
  std::set<std::uint16_t> taken;
  auto fresh_port = [&taken] {
    while (true) {
      const std::uint16_t p = free_port();
      if (taken.insert(p).second) return p;
    }
  };
  std::vector<std::string> peers;
  for (int i = 0; i < n; ++i) {
    Member m;
    m.client_port = fresh_port();
    m.peer_port = fresh_port();
    peers.push_back("m" + std::to_string(i) + "=" + url(m.peer_port));
    members_.push_back(std::move(m));
  }
  // Unique per cluster and attempt, so members of different clusters never join up.
  const std::string token = dir_.path().filename().string() + "-" + std::to_string(getpid()) + "-" +
                            std::to_string(attempt);
  for (int i = 0; i < n; ++i) {
    Member& m = members_[static_cast<std::size_t>(i)];
    const std::string name = "m" + std::to_string(i);
    const auto data_dir = dir_.path() / name;
    const auto log = dir_.path() / (name + ".log");
    std::error_code ignored;
    std::filesystem::remove_all(data_dir, ignored);  // left by an earlier attempt
    std::filesystem::remove(log, ignored);
    const std::string client_url = tls() ? tls_url(m.client_port) : url(m.client_port);
    // --pre-vote: a paused or restarted member does not depose a healthy leader when it
    // comes back. --bcrypt-cost: cheap password checks, as every authenticated client
    // connection pays one.
    std::vector<std::string> argv = {etcd_path(),
                                     "--name",
                                     name,
                                     "--data-dir",
                                     data_dir.string(),
                                     "--listen-client-urls",
                                     client_url,
                                     "--advertise-client-urls",
                                     client_url,
                                     "--listen-peer-urls",
                                     url(m.peer_port),
                                     "--initial-advertise-peer-urls",
                                     url(m.peer_port),
                                     "--initial-cluster",
                                     join(peers, ","),
                                     "--initial-cluster-state",
                                     "new",
                                     "--initial-cluster-token",
                                     token,
                                     "--heartbeat-interval=10",
                                     "--election-timeout=100",
                                     "--pre-vote=true",
                                     "--snapshot-count=10000",
                                     "--bcrypt-cost=4",
                                     "--logger=zap",
                                     "--log-level=info",
                                     "--log-outputs=stderr"};
    if (const auto& tls = tls_) {
      const TestCerts& certs = TestCerts::shared();
      const CertPair& server = tls->server_cert.value_or(certs.server());
      argv.insert(argv.end(),
                  {"--cert-file", server.cert.string(), "--key-file", server.key.string()});
      if (tls->client_cert_auth) {
        argv.insert(argv.end(),
                    {"--trusted-ca-file", certs.ca().cert.string(), "--client-cert-auth"});
      }
    }
    m.process = ServerProcess(std::move(argv), log);
  }
  const auto deadline = SteadyClock::now() + kStartLimit;
  // true if member i has exited because a port was taken; throws if it exited otherwise.
  auto lost_port = [this](int i) {
    Member& m = members_[static_cast<std::size_t>(i)];
    if (m.process.running()) return false;
    if (m.process.log_text().find(kPortTaken) != std::string::npos) return true;
    throw std::runtime_error("etcd member m" + std::to_string(i) + " exited during start; logs:\n" +
                             log_tails());
  };
  // All members before waiting for any to answer: several need a quorum to elect. One
  // at a time, though: a new member asks the others' peer ports whether it was
  // bootstrapped already, and waits a second for each peer port that is bound but not
  // served yet. Started once the previous one serves its peers, none waits.
  for (int i = 0; i < n; ++i) {
    Member& m = members_[static_cast<std::size_t>(i)];
    m.process.start();
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (m.process.wait_for_log("serving peer traffic", std::max(left, 1ms))) continue;
    if (lost_port(i)) return false;
    throw std::runtime_error("etcd member m" + std::to_string(i) + " did not serve its peers" +
                             " within " + std::to_string(kStartLimit.count()) + " s; logs:\n" +
                             log_tails());
  }

  std::vector<int> all;
  for (int i = 0; i < n; ++i) all.push_back(i);
  while (true) {
    for (int i = 0; i < n; ++i) {
      if (lost_port(i)) return false;
    }
    const bool listening = std::all_of(members_.begin(), members_.end(), [](const Member& m) {
      return wait_for_port(m.client_port, 1ms);
    });
    if (listening && healthy(all)) return true;
    if (SteadyClock::now() >= deadline) {
      throw std::runtime_error("etcd cluster did not answer within " +
                               std::to_string(kStartLimit.count()) + " s; logs:\n" + log_tails());
    }
    std::this_thread::sleep_for(20ms);
  }
}

void EtcdCluster::enable_auth() {
  const std::string& password = *options_.root_password;
  etcdctl({"user", "add", "root", "--new-user-password=" + password, "--interactive=false"});
  etcdctl({"role", "add", "root"});
  etcdctl({"user", "grant-role", "root", "root"});
  etcdctl({"auth", "enable"});
  auth_on_ = true;
  // A linearizable read on every member: each has applied "auth enable" when it answers.
  std::vector<int> all;
  for (int i = 0; i < size(); ++i) all.push_back(i);
  const auto deadline = SteadyClock::now() + kStartLimit;
  while (!healthy(all)) {
    if (SteadyClock::now() >= deadline) {
      throw std::runtime_error("etcd cluster did not answer after auth enable; logs:\n" +
                               log_tails());
    }
    std::this_thread::sleep_for(20ms);
  }
}

std::uint16_t EtcdCluster::client_port(int member) const { return at(member).client_port; }

std::string EtcdCluster::endpoint(int member) const {
  return "127.0.0.1:" + std::to_string(client_port(member));
}

std::string EtcdCluster::credentials() const {
  if (!auth_on_) return {};
  return "root:" + percent_encode(*options_.root_password) + "@";
}

std::string EtcdCluster::endpoints() const {
  std::vector<std::string> all;
  for (int i = 0; i < size(); ++i) all.push_back(endpoint(i));
  return join(all, ",");
}

std::string EtcdCluster::scheme() const { return tls() ? "etcds://" : "etcd://"; }

std::string EtcdCluster::tls_query() const {
  if (!tls()) return {};
  const TestCerts& certs = TestCerts::shared();
  std::string query = "?ca=" + percent_encode(certs.ca().cert.string());
  if (tls_->client_cert_auth) {
    query += "&cert=" + percent_encode(certs.client().cert.string()) +
             "&key=" + percent_encode(certs.client().key.string());
  }
  return query;
}

std::string EtcdCluster::bare_uri() const { return scheme() + endpoints() + tls_query(); }

std::string EtcdCluster::uri() const {
  return scheme() + credentials() + endpoints() + tls_query();
}

std::string EtcdCluster::uri_of(int member) const {
  return scheme() + credentials() + endpoint(member) + tls_query();
}

void EtcdCluster::kill9(int member) {
  Member& m = at(member);
  m.process.kill9();
  m.paused = false;
}

void EtcdCluster::start(int member) {
  Member& m = at(member);
  m.paused = false;
  const int quorum = size() / 2 + 1;
  for (int attempt = 0; attempt < kRestartAttempts; ++attempt) {
    // Only what this start writes to the log counts (the log keeps earlier runs).
    const std::size_t log_before = m.process.log_text().size();
    m.process.start();
    const auto deadline = SteadyClock::now() + kStartLimit;
    bool port_taken = false;
    while (true) {
      if (!m.process.running()) {
        const std::string log = m.process.log_text();
        if (log.find(kPortTaken, std::min(log_before, log.size())) != std::string::npos) {
          port_taken = true;
          break;
        }
        throw std::runtime_error("etcd member m" + std::to_string(member) +
                                 " exited during restart; logs:\n" + log_tails());
      }
      if (wait_for_port(m.client_port, 1ms)) {
        const std::vector<int> up = reachable();
        const int others = static_cast<int>(
            std::count_if(up.begin(), up.end(), [member](int i) { return i != member; }));
        // Without a quorum it cannot answer yet: it waits for a leader before it serves.
        if (others + 1 < quorum) return;
        // With one, its own log must say it serves clients: while it was down, a server of
        // a test running alongside may have taken the port, and would answer in its place.
        const std::string log = m.process.log_text();
        const bool serving =
            log.find(kServingClients, std::min(log_before, log.size())) != std::string::npos;
        if (serving && healthy({member}) && m.process.running()) return;
      }
      if (SteadyClock::now() >= deadline) {
        throw std::runtime_error("etcd member m" + std::to_string(member) +
                                 " did not answer after restart within " +
                                 std::to_string(kStartLimit.count()) + " s; logs:\n" + log_tails());
      }
      std::this_thread::sleep_for(20ms);
    }
    if (port_taken) std::this_thread::sleep_for(200ms);
  }
  throw std::runtime_error("etcd member m" + std::to_string(member) +
                           " could not bind its ports again; logs:\n" + log_tails());
}

void EtcdCluster::pause(int member) {
  Member& m = at(member);
  if (!m.process.running()) return;
  m.process.signal(SIGSTOP);
  m.paused = true;
}

void EtcdCluster::resume(int member) {
  Member& m = at(member);
  m.process.signal(SIGCONT);
  m.paused = false;
}

bool EtcdCluster::running(int member) { return at(member).process.running(); }

bool EtcdCluster::paused(int member) const { return at(member).paused; }

ServerProcess& EtcdCluster::process(int member) { return at(member).process; }

std::vector<int> EtcdCluster::reachable() {
  std::vector<int> up;
  for (int i = 0; i < size(); ++i) {
    Member& m = members_[static_cast<std::size_t>(i)];
    if (m.process.running() && !m.paused) up.push_back(i);
  }
  return up;
}

EtcdCluster::Run EtcdCluster::run_etcdctl(const std::vector<int>& members,
                                          const std::vector<std::string>& args, bool probe) const {
  std::vector<std::string> endpoints;
  for (const int i : members) {
    endpoints.push_back((tls() ? "https://" : "") + endpoint(i));
  }
  // A member that listens but has not joined a leader yet accepts the connection and
  // says nothing, so a probe's dial gives up early.
  std::vector<std::string> argv = {etcdctl_path(), "--endpoints=" + join(endpoints, ","),
                                   probe ? "--dial-timeout=500ms" : "--dial-timeout=2s",
                                   probe ? "--command-timeout=1s" : "--command-timeout=5s"};
  // user:password is split at the first ':', so the password may hold any character.
  if (auth_on_) argv.push_back("--user=root:" + *options_.root_password);
  if (const auto& tls = tls_) {
    const TestCerts& certs = TestCerts::shared();
    argv.push_back("--cacert=" + certs.ca().cert.string());
    if (tls->client_cert_auth) {
      argv.push_back("--cert=" + certs.client().cert.string());
      argv.push_back("--key=" + certs.client().key.string());
    }
    // A cluster made to be refused (expired or wrong-host certificate) is still looked
    // at from here.
    if (tls->server_cert) argv.push_back("--insecure-skip-tls-verify");
  }
  argv.insert(argv.end(), args.begin(), args.end());
  Output o = run_process(argv, kEtcdctlLimit);
  return Run{o.status, std::move(o.out), std::move(o.err)};
}

bool EtcdCluster::healthy(const std::vector<int>& members) const {
  return !members.empty() && run_etcdctl(members, {"endpoint", "health"}, true).status == 0;
}

std::string EtcdCluster::etcdctl(const std::vector<std::string>& args, int only_member) {
  std::vector<int> members;
  if (only_member >= 0) {
    at(only_member);  // range check
    members.push_back(only_member);
  } else {
    members = reachable();
    if (members.empty()) throw std::runtime_error("etcdctl: no etcd member is running");
  }
  Run r = run_etcdctl(members, args);
  if (r.status != 0) {
    throw std::runtime_error("etcdctl " + join(args, " ") + " failed (exit " +
                             std::to_string(r.status) + "): " + r.err);
  }
  return std::move(r.out);
}

int EtcdCluster::leader() {
  const auto deadline = SteadyClock::now() + kElectionLimit;
  std::string last_status;
  while (true) {
    const std::vector<int> up = reachable();
    if (up.empty()) throw std::runtime_error("leader(): no etcd member is running");
    // Parsed even after a non-zero exit: etcdctl prints the members that answered.
    const Run r = run_etcdctl(up, {"endpoint", "status", "-w", "json"}, true);
    int best = -1;
    unsigned long long best_term = 0;
    const std::string_view out = r.out;
    constexpr std::string_view kEntry = "{\"Endpoint\":\"";
    for (auto pos = out.find(kEntry); pos != std::string_view::npos;) {
      const auto next = out.find(kEntry, pos + kEntry.size());
      const std::string_view entry =
          out.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
      pos = next;
      const auto ep_end = entry.find('"', kEntry.size());
      if (ep_end == std::string_view::npos) continue;
      const std::string_view ep = entry.substr(kEntry.size(), ep_end - kEntry.size());
      const std::string id = json_number(entry, "member_id");
      const std::string leader_id = json_number(entry, "leader");  // absent: no leader
      const std::string term = json_number(entry, "raftTerm");
      if (id.empty() || leader_id != id) continue;
      const unsigned long long t = term.empty() ? 0 : std::stoull(term);
      for (const int i : up) {
        if (endpoint(i) == ep && (best < 0 || t > best_term)) {
          best = i;
          best_term = t;
        }
      }
    }
    if (best >= 0) return best;
    last_status = r.out + r.err;
    if (SteadyClock::now() >= deadline) {
      throw std::runtime_error("no etcd leader within " + std::to_string(kElectionLimit.count()) +
                               " s; last endpoint status: " + last_status);
    }
    std::this_thread::sleep_for(20ms);
  }
}

std::vector<std::string> EtcdCluster::keys(const std::string& prefix) {
  // JSON, because it gives the keys base64-encoded: any byte, newlines included.
  const std::string out = etcdctl({"get", "--prefix", "--keys-only", "-w", "json", "--", prefix});
  std::vector<std::string> names;
  constexpr std::string_view kKey = "\"key\":\"";
  for (auto pos = out.find(kKey); pos != std::string::npos; pos = out.find(kKey, pos)) {
    pos += kKey.size();
    const auto end = out.find('"', pos);
    if (end == std::string::npos) break;
    names.push_back(base64_decode(std::string_view(out).substr(pos, end - pos)));
    pos = end;
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<EtcdCluster::KeyRevision> EtcdCluster::keys_by_revision(const std::string& prefix) {
  // Each kv of the JSON reply reads {"key":"BASE64","create_revision":N,...,"value":"BASE64"}.
  const std::string out = etcdctl({"get", "--prefix", "-w", "json", "--", prefix});
  std::vector<KeyRevision> found;
  constexpr std::string_view kKey = "\"key\":\"";
  constexpr std::string_view kCreated = "\"create_revision\":";
  for (auto pos = out.find(kKey); pos != std::string::npos; pos = out.find(kKey, pos)) {
    pos += kKey.size();
    const auto end = out.find('"', pos);
    const auto created = out.find(kCreated, pos);
    if (end == std::string::npos || created == std::string::npos) {
      throw std::runtime_error("etcdctl get -w json answered '" + out + "'");
    }
    KeyRevision kv;
    kv.key = base64_decode(std::string_view(out).substr(pos, end - pos));
    kv.create_revision = std::stoll(out.substr(created + kCreated.size()));
    // The value of this kv: before the next kv's key.
    constexpr std::string_view kValue = "\"value\":\"";
    const auto next = out.find(kKey, end);
    const auto value = out.find(kValue, end);
    if (value != std::string::npos && (next == std::string::npos || value < next)) {
      const auto from = value + kValue.size();
      const auto to = out.find('"', from);
      if (to == std::string::npos)
        throw std::runtime_error("etcdctl get -w json answered '" + out + "'");
      kv.value = base64_decode(std::string_view(out).substr(from, to - from));
    }
    found.push_back(std::move(kv));
    pos = end;
  }
  std::sort(found.begin(), found.end(), [](const KeyRevision& a, const KeyRevision& b) {
    return a.create_revision < b.create_revision;
  });
  return found;
}

long long EtcdCluster::delete_prefix(const std::string& prefix) {
  const std::string out = etcdctl({"del", "--prefix", "--", prefix});
  try {
    return std::stoll(out);
  } catch (const std::exception&) {
    throw std::runtime_error("etcdctl del answered '" + out + "'");
  }
}

std::string EtcdCluster::log_tails() const {
  std::string text;
  for (int i = 0; i < size(); ++i) {
    text += "--- etcd m" + std::to_string(i) + " ---\n";
    text += tail(members_[static_cast<std::size_t>(i)].process.log_text(), 20);
    if (!text.empty() && text.back() != '\n') text += '\n';
  }
  return text;
}

}  // namespace warden::testing
