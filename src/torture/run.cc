#include "torture/run.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "torture/checker.h"
#include "torture/clock.h"
#include "torture/history.h"
#include "torture/partition_proxy.h"
#include "torture/resource_link.h"
#include "torture/timeline_svg.h"
#include "warden/client.h"
#include "warden/error.h"

extern char** environ;

namespace warden::torture {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// A child process started by the run; killed (and reaped) if still running when the
// run is done with it.
class Process {
 public:
  Process() = default;
  Process(const std::vector<std::string>& argv, const fs::path& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  Process(Process&& other) noexcept : pid_(std::exchange(other.pid_, -1)) {}
  Process& operator=(Process&& other) noexcept {
    if (this != &other) {
      kill_and_reap();
      pid_ = std::exchange(other.pid_, -1);
    }
    return *this;
  }
  ~Process() { kill_and_reap(); }

  pid_t pid() const { return pid_; }
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits up to `timeout` for the exit; true if it exited (and was reaped).
  bool wait_for(milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return true;
  }
  void kill_and_reap() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

// Runs `command` with sh and returns its stdout's first number (the PID it started).
pid_t start_again(const std::string& command) {
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) throw std::runtime_error("cannot run: " + command);
  long pid = -1;
  if (std::fscanf(out, "%ld", &pid) != 1) pid = -1;
  ::pclose(out);
  if (pid <= 0) throw std::runtime_error("restart command printed no PID: " + command);
  return static_cast<pid_t>(pid);
}

// Runs `command` with sh; throws if it fails.
void run_command(const std::string& command) {
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

class Run {
 public:
  explicit Run(const TortureOptions& options) : options_(options), random_(options.seed) {
    out_ = fs::absolute(options.out_dir);
    fs::create_directories(out_);
    char scratch[] = "/tmp/warden-torture-XXXXXX";
    if (::mkdtemp(scratch) == nullptr) throw std::runtime_error("mkdtemp failed");
    scratch_ = scratch;
    socket_ = (scratch_ / "resource.sock").string();
    for (const auto& name : {"history.jsonl", "resource.jsonl", "nemesis.jsonl"}) {
      fs::remove(out_ / name);
    }
    for (const auto& entry : fs::directory_iterator(out_)) {
      const auto name = entry.path().filename().string();
      if (name.rfind("client-", 0) == 0) fs::remove(entry.path());
    }
    nemesis_log_.open(out_ / "nemesis.jsonl");
    server_pids_ = options.server_pids;
  }

  ~Run() {
    for (auto& [client, process] : clients_) process.kill_and_reap();
    resource_.kill_and_reap();
    std::error_code ignored;
    fs::remove_all(scratch_, ignored);
  }

  int execute() {
    // The engine must open before anything starts; its capabilities say whether the
    // run is judged as fenced.
    const Capabilities caps = Client::open(options_.url).capabilities();
    const bool semaphore = options_.primitive == Primitive::semaphore;
    if (semaphore && !caps.semaphore) {
      throw warden::Error(warden::Errc::unsupported, options_.url + " has no semaphores");
    }
    if (options_.primitive == Primitive::election && !caps.election) {
      throw warden::Error(warden::Errc::unsupported, options_.url + " has no elections");
    }

    std::vector<std::string> resource_argv = {options_.self, "torture-resource", "--socket",
                                              socket_, "--history",
                                              (out_ / "resource.jsonl").string()};
    if (semaphore) resource_argv.push_back("--unfenced");
    resource_ = Process(resource_argv, out_ / "resource.log");
    const auto ready_by = now_ns() + 5'000'000'000LL;
    while (!link_) {
      try {
        link_ = std::make_unique<ResourceLink>(socket_);
      } catch (const std::runtime_error&) {
        if (now_ns() > ready_by) throw std::runtime_error("the resource did not start");
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
    for (int i = 0; i < options_.clients; ++i) start_client();

    const Nanos begin = now_ns();
    const Nanos end = begin + to_ns(options_.duration);
    Nanos next_fault = begin + to_ns(std::max(milliseconds(500), options_.ttl * 2));
    Nanos next_progress = begin + 1'000'000'000LL;
    while (now_ns() < end) {
      if (options_.nemesis != Nemesis::none && now_ns() >= next_fault) {
        inject();
        next_fault = now_ns() + to_ns(std::max(milliseconds(500), options_.ttl * 2));
      }
      if (now_ns() >= next_progress) {
        progress(begin);
        next_progress += 1'000'000'000LL;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    const Nanos run_end = now_ns();
    progress(begin);
    std::cerr << "\n";
    stop_everything();

    auto history = collect();
    {
      std::ofstream out(out_ / "history.jsonl");
      for (const Event& event : history) write_event(out, event);
    }
    CheckOptions check_options;
    check_options.recovery_bound = to_ns(options_.ttl + options_.epsilon);
    check_options.run_end = run_end;
    check_options.fenced = caps.fencing;
    if (semaphore) check_options.permits = options_.permits;
    const CheckResult result = check(history, check_options);

    std::vector<std::string> lines;
    lines.push_back("warden torture --url " + options_.url + " --clients " +
                    std::to_string(options_.clients) + " --duration " +
                    std::to_string(options_.duration.count()) + "ms --ttl " +
                    std::to_string(options_.ttl.count()) + "ms --nemesis " +
                    to_string(options_.nemesis) + " --seed " + std::to_string(options_.seed) +
                    primitive_options());
    for (auto& line : result.summary(check_options)) lines.push_back(std::move(line));
    lines.push_back(
        "NOTE  clock jumps of the backend's servers are not injected (libfaketime hangs "
        "redis-server and Go ignores it)");
    lines.push_back(result.passed(check_options) ? "RESULT PASS" : "RESULT FAIL");
    std::ofstream summary(out_ / "summary.txt");
    for (const auto& line : lines) {
      std::cout << line << "\n";
      summary << line << "\n";
    }
    std::ofstream(out_ / "row.md") << table_row(result, check_options) << "\n";
    TimelineOptions timeline;
    timeline.title = lines.front();
    timeline.clients = next_client_;
    std::ofstream(out_ / "timeline.svg") << timeline_svg(history, timeline);
    std::cout << "history: " << (out_ / "history.jsonl").string()
              << "\ntimeline: " << (out_ / "timeline.svg").string() << std::endl;
    return result.passed(check_options) ? 0 : 1;
  }

 private:
  static Nanos to_ns(milliseconds ms) { return static_cast<Nanos>(ms.count()) * 1'000'000; }

  static std::string ms_text(Nanos ns) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.0f", static_cast<double>(ns) / 1e6);
    return text;
  }

  // | engine | nemesis | grants | faults | stale holds overlapping | rejected writes |
  // | stale accepted | tokens backwards | max recovery / bound (ms) | lost told / untold |
  // | unanswered waits | verdict |
  std::string table_row(const CheckResult& r, const CheckOptions& o) const {
    // Each overlap's older side (the smaller token): a holder still writing after a newer
    // grant began, counted once however many newer holds it overlapped.
    std::set<std::pair<int, std::uint64_t>> overlapped;
    for (const Overlap& overlap : r.overlaps) {
      if (overlap.token_a <= overlap.token_b) {
        overlapped.emplace(overlap.client_a, overlap.token_a);
      } else {
        overlapped.emplace(overlap.client_b, overlap.token_b);
      }
    }
    std::string label = options_.label;
    if (label.empty()) label = options_.url.substr(0, options_.url.find(':'));
    if (options_.primitive == Primitive::semaphore) {
      label += " (semaphore of " + std::to_string(options_.permits) + ")";
    } else if (options_.primitive == Primitive::election) {
      label += " (election)";
    }
    std::string recovery = r.recoveries.empty() && r.recoveries_unfinished == 0
                               ? "–"
                               : ms_text(r.max_recovery) + " / " + ms_text(o.recovery_bound);
    if (r.recoveries_unfinished > 0) {
      recovery += " (+" + std::to_string(r.recoveries_unfinished) + " unrecovered)";
    }
    // Backend faults: how long until the next grant, beside the judged figure.
    if (!r.server_recoveries.empty() || r.server_recoveries_unfinished > 0) {
      recovery += "; backend: " + ms_text(r.max_server_recovery);
      if (r.server_recoveries_unfinished > 0) {
        recovery += " (+" + std::to_string(r.server_recoveries_unfinished) + " unrecovered)";
      }
    }
    return "| " + label + " | " + to_string(options_.nemesis) + " | " + std::to_string(r.grants) +
           " | " + std::to_string(r.faults) + " | " +
           // A semaphore's run: the holds begun beyond its permits, in the overlaps column.
           std::to_string(o.permits > 0 ? r.over_permits
                                        : static_cast<long>(overlapped.size())) +
           " | " + std::to_string(r.writes_rejected) + " | " +
           (o.fenced && o.permits == 0 ? std::to_string(r.stale_accepted) : "n/a") + " | " +
           (o.permits == 0 ? std::to_string(r.tokens_backwards) : "n/a") + " | " + recovery +
           " | " +
           (o.permits == 0 ? std::to_string(r.lost_told) + " / " + std::to_string(r.lost_untold)
                           : "n/a") +
           " | " +
           std::to_string(r.waits_unfinished) + " | " + (r.passed(o) ? "PASS" : "**FAIL**") + " |";
  }

  void start_client() {
    const int id = next_client_++;
    const std::string name = "client-" + std::to_string(id);
    // Under partition-client every client reaches the backend through relays of its
    // own, which the nemesis can cut.
    std::string url = options_.url;
    if (options_.nemesis == Nemesis::partition_client) url = proxied_url(url, proxies_[id]);
    clients_.emplace(
        id, Process({options_.self, "torture-client", "--url", url, "--client", std::to_string(id),
                     "--socket", socket_, "--history", (out_ / (name + ".jsonl")).string(), "--ttl",
                     std::to_string(options_.ttl.count()) + "ms", "--seed",
                     std::to_string(options_.seed * 1000 + static_cast<std::uint64_t>(id)),
                     "--primitive", to_string(options_.primitive), "--permits",
                     std::to_string(options_.permits)},
                    out_ / (name + ".log")));
  }

  // The run's primitive as the command line gives it ("" for a lock's run).
  std::string primitive_options() const {
    if (options_.primitive == Primitive::lock) return "";
    std::string text = std::string(" --primitive ") + to_string(options_.primitive);
    if (options_.primitive == Primitive::semaphore) {
      text += " --permits " + std::to_string(options_.permits);
    }
    return text;
  }

  void record_fault(const std::string& target, int client, Nanos start, Nanos end) {
    Event event;
    event.kind = EventKind::fault;
    event.nemesis = to_string(options_.nemesis);
    event.target = target;
    event.client = client;
    event.time = event.start = start;
    event.end = end;
    write_event(nemesis_log_, event);
    nemesis_log_.flush();
    ++faults_;
  }

  void record_death(int client, Nanos when) {
    Event event;
    event.kind = EventKind::death;
    event.client = client;
    event.time = when;
    write_event(nemesis_log_, event);
    nemesis_log_.flush();
  }

  // The client holding the lock now (its write under way), waiting up to 2 s for one.
  int holder() {
    const Nanos until = now_ns() + 2'000'000'000LL;
    while (now_ns() < until) {
      const int client = std::stoi(link_->ask("HOLDER"));
      if (client >= 0 && clients_.count(client) > 0) return client;
      std::this_thread::sleep_for(milliseconds(2));
    }
    return -1;
  }

  milliseconds pause_length() const { return options_.ttl * 2 + options_.epsilon; }

  void inject() {
    switch (options_.nemesis) {
      case Nemesis::none:
        return;
      case Nemesis::pause_holder: {
        const int client = holder();
        if (client < 0) return;
        const Process& p = clients_.at(client);
        const Nanos start = now_ns();
        p.signal(SIGSTOP);
        std::this_thread::sleep_for(pause_length());
        p.signal(SIGCONT);
        record_fault("client " + std::to_string(client), client, start, now_ns());
        return;
      }
      case Nemesis::kill_holder:
      case Nemesis::kill_waiter: {
        int client = holder();
        if (options_.nemesis == Nemesis::kill_waiter) {
          std::vector<int> others;
          for (const auto& [id, process] : clients_) {
            if (id != client) others.push_back(id);
          }
          if (others.empty()) return;
          client =
              others[std::uniform_int_distribution<std::size_t>(0, others.size() - 1)(random_)];
        }
        if (client < 0) return;
        const Nanos start = now_ns();
        clients_.at(client).kill_and_reap();
        const Nanos dead = now_ns();
        clients_.erase(client);
        record_fault("client " + std::to_string(client), client, start, dead);
        record_death(client, dead);
        start_client();
        return;
      }
      case Nemesis::partition_client: {
        const int client = holder();
        if (client < 0) return;
        const Nanos start = now_ns();
        for (auto& proxy : proxies_[client]) proxy->cut();
        std::this_thread::sleep_for(pause_length());
        for (auto& proxy : proxies_[client]) proxy->heal();
        record_fault("client " + std::to_string(client), client, start, now_ns());
        return;
      }
      case Nemesis::failover:
      case Nemesis::kill_leader: {
        const pid_t master = start_again(options_.master_command);
        const auto it = std::find(server_pids_.begin(), server_pids_.end(), master);
        if (it == server_pids_.end()) return;  // not one of ours (yet): no fault this time
        const std::size_t i = static_cast<std::size_t>(it - server_pids_.begin());
        const Nanos start = now_ns();
        ::kill(master, SIGKILL);
        while (::kill(master, 0) == 0) std::this_thread::sleep_for(milliseconds(5));
        // Until the sentinels name another master (bounded: a failover that never comes
        // shows as a run with no grants, which the checker reports).
        const Nanos give_up = start + 60'000'000'000LL;
        while (now_ns() < give_up) {
          try {
            const pid_t now = start_again(options_.master_command);
            if (now != master && ::kill(now, 0) == 0) break;
          } catch (const std::runtime_error&) {
            // No master named right now (the sentinels are voting): ask again.
          }
          std::this_thread::sleep_for(milliseconds(50));
        }
        const Nanos promoted = now_ns();
        server_pids_[i] = start_again(options_.server_restart.at(i));
        record_fault("master pid " + std::to_string(master), -1, start, promoted);
        return;
      }
      case Nemesis::pause_leader: {
        const pid_t leader = start_again(options_.master_command);
        if (std::find(server_pids_.begin(), server_pids_.end(), leader) == server_pids_.end()) {
          return;  // not one of ours (yet): no fault this time
        }
        const Nanos start = now_ns();
        ::kill(leader, SIGSTOP);
        std::this_thread::sleep_for(pause_length());
        ::kill(leader, SIGCONT);
        record_fault("leader pid " + std::to_string(leader), -1, start, now_ns());
        return;
      }
      case Nemesis::partition_leader: {
        const pid_t leader = start_again(options_.master_command);
        if (std::find(server_pids_.begin(), server_pids_.end(), leader) == server_pids_.end()) {
          return;  // not one of ours (yet): no fault this time
        }
        const std::string pid = std::to_string(leader);
        const Nanos start = now_ns();
        run_command(options_.isolate_command + " cut " + pid);
        std::this_thread::sleep_for(pause_length());
        run_command(options_.isolate_command + " heal " + pid);
        record_fault("leader pid " + pid + " cut off from the other members", -1, start, now_ns());
        return;
      }
      case Nemesis::restart_cell: {
        const Nanos start = now_ns();
        for (const pid_t pid : server_pids_) ::kill(pid, SIGKILL);
        for (const pid_t pid : server_pids_) {
          while (::kill(pid, 0) == 0) std::this_thread::sleep_for(milliseconds(5));
        }
        for (std::size_t i = 0; i < server_pids_.size(); ++i) {
          server_pids_[i] = start_again(options_.server_restart.at(i));
        }
        record_fault("every server", -1, start, now_ns());
        return;
      }
      case Nemesis::pause_server:
      case Nemesis::kill_server:
      case Nemesis::restart_server: {
        if (server_pids_.empty()) return;
        const std::size_t i =
            std::uniform_int_distribution<std::size_t>(0, server_pids_.size() - 1)(random_);
        const pid_t pid = server_pids_[i];
        const std::string target = "server pid " + std::to_string(pid);
        const Nanos start = now_ns();
        if (options_.nemesis == Nemesis::pause_server) {
          ::kill(pid, SIGSTOP);
          std::this_thread::sleep_for(pause_length());
          ::kill(pid, SIGCONT);
        } else {
          ::kill(pid, SIGKILL);
          // Not our child: wait until it is gone before starting it again.
          while (::kill(pid, 0) == 0) std::this_thread::sleep_for(milliseconds(5));
          if (options_.nemesis == Nemesis::kill_server) std::this_thread::sleep_for(options_.ttl);
          server_pids_[i] = start_again(options_.server_restart.at(i));
        }
        record_fault(target, -1, start, now_ns());
        return;
      }
    }
  }

  void progress(Nanos begin) {
    std::string stats = "?";
    if (!link_) return;
    try {
      stats = link_->ask("STATS");
    } catch (const std::runtime_error&) {
    }
    const auto space = stats.find(' ');
    std::cerr << "\r" << (now_ns() - begin) / 1'000'000'000 << " s: writes "
              << stats.substr(0, space) << ", rejected "
              << (space == std::string::npos ? "?" : stats.substr(space + 1)) << ", faults "
              << faults_ << "   " << std::flush;
  }

  void stop_everything() {
    for (auto& [id, process] : clients_) {
      process.signal(SIGCONT);
      process.signal(SIGTERM);
    }
    const milliseconds grace = options_.ttl * 2 + milliseconds(3'000);
    for (auto& [id, process] : clients_) {
      if (!process.wait_for(grace)) process.kill_and_reap();
    }
    link_.reset();
    resource_.signal(SIGTERM);
    if (!resource_.wait_for(milliseconds(3'000))) resource_.kill_and_reap();
  }

  std::vector<Event> collect() {
    std::vector<Event> all;
    for (const auto& entry : fs::directory_iterator(out_)) {
      const auto name = entry.path().filename().string();
      if (entry.path().extension() != ".jsonl" || name == "history.jsonl") continue;
      std::ifstream in(entry.path());
      auto events = read_history(in);
      all.insert(all.end(), events.begin(), events.end());
    }
    return sorted_by_time(std::move(all));
  }

  const TortureOptions options_;
  std::mt19937_64 random_;
  fs::path out_;
  fs::path scratch_;
  std::string socket_;
  std::ofstream nemesis_log_;
  std::vector<pid_t> server_pids_;
  Process resource_;
  std::unique_ptr<ResourceLink> link_;
  std::map<int, Process> clients_;
  std::map<int, std::vector<std::unique_ptr<PartitionProxy>>> proxies_;  // partition-client
  int next_client_ = 0;
  long faults_ = 0;
};

}  // namespace

int run_torture(const TortureOptions& options) {
  if (options.clients < 1) throw std::runtime_error("--clients must be at least 1");
  if (options.primitive == Primitive::semaphore &&
      (options.permits < 1 || static_cast<int>(options.permits) >= options.clients)) {
    throw std::runtime_error(
        "--permits must be at least 1 and fewer than --clients, or nobody ever waits");
  }
  if (hits_server(options.nemesis) && options.server_pids.empty()) {
    throw std::runtime_error(std::string("--nemesis ") + to_string(options.nemesis) +
                             " needs --server-pid for each backend process");
  }
  if (options.nemesis == Nemesis::partition_leader && options.isolate_command.empty()) {
    throw std::runtime_error("--nemesis partition-leader needs --isolate-command");
  }
  if (needs_master(options.nemesis) && options.master_command.empty()) {
    throw std::runtime_error(std::string("--nemesis ") + to_string(options.nemesis) +
                             " needs --master-command");
  }
  if ((options.nemesis == Nemesis::kill_server || options.nemesis == Nemesis::restart_server ||
       options.nemesis == Nemesis::failover || options.nemesis == Nemesis::kill_leader ||
       options.nemesis == Nemesis::restart_cell) &&
      options.server_pids.size() != options.server_restart.size()) {
    throw std::runtime_error(std::string("--nemesis ") + to_string(options.nemesis) +
                             " needs a --server-restart command for each --server-pid");
  }
  Run run(options);
  return run.execute();
}

}  // namespace warden::torture
