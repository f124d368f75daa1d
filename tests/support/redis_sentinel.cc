#include "support/redis_sentinel.h"

#include <csignal>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

// How long the deployment may take to settle; generous for a loaded sanitizer build.
constexpr auto kSettle = 60s;

std::uint16_t port_of(const std::string& text) {
  try {
    return static_cast<std::uint16_t>(std::stoul(text));
  } catch (const std::exception&) {
    return 0;
  }
}

// The master a sentinel names ("IP\nPORT"), 0 if it names none or cannot be asked.
std::uint16_t named_master(std::uint16_t sentinel, const std::string& name) {
  try {
    const std::string reply =
        redis_command(sentinel, {"SENTINEL", "get-master-addr-by-name", name}, 2s);
    const auto newline = reply.find('\n');
    return newline == std::string::npos ? 0 : port_of(reply.substr(newline + 1));
  } catch (const std::runtime_error&) {
    return 0;
  }
}

// The flags a sentinel gives the master ("master" when it sees nothing wrong; s_down,
// o_down, failover_in_progress while it doubts it or moves it).
std::string master_flags(std::uint16_t sentinel, const std::string& name) {
  try {
    const std::string text = redis_command(sentinel, {"SENTINEL", "master", name}, 2s);
    const auto at = text.find("\nflags\n");
    if (at == std::string::npos) return "";
    const auto from = at + 7;
    return text.substr(from, text.find('\n', from) - from);
  } catch (const std::runtime_error&) {
    return "";
  }
}

// Sentinel's own periods, shortened so that the deployment settles in seconds (Redis 7:
// SENTINEL DEBUG, not kept in sentinel.conf, so set at every start). A ping every 250 ms
// against a down-after of 1 s keeps one late reply from calling a master that was just
// switched to down again (a second failover nobody asked for); a tilt period of 5 s
// bounds how long a late timer on a loaded machine freezes a sentinel.
void tune(std::uint16_t sentinel) {
  redis_command(sentinel, {"SENTINEL", "DEBUG", "ping-period", "250", "info-period", "1000",
                           "publish-period", "500", "tilt-period", "5000"});
}

bool says_master(std::uint16_t port) {
  try {
    return redis_command(port, {"ROLE"}, 2s).rfind("master\n", 0) == 0;
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace

RedisSentinelGroup::RedisSentinelGroup(RedisSentinelOptions options)
    : options_(std::move(options)) {
  // Replicas sync at once (no 5 s wait for more replicas to share a diskless sync).
  RedisOptions master;
  master.extra_args = {"--repl-diskless-sync-delay", "0"};
  data_.push_back(std::make_unique<RedisServer>(master));
  const std::uint16_t master_port = data_.front()->port();
  for (int i = 0; i < options_.replicas; ++i) {
    RedisOptions replica;
    replica.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master_port),
                          "--repl-diskless-sync-delay", "0"};
    data_.push_back(std::make_unique<RedisServer>(replica));
  }
  wait_for_replicas(master_port, static_cast<std::size_t>(options_.replicas));

  const int quorum = std::min(2, options_.sentinels);
  for (int i = 0; i < options_.sentinels; ++i) {
    Sentinel sentinel;
    sentinel.dir = std::make_unique<TempDir>("warden-sentinel");
    sentinel.port = free_port();
    const auto conf = sentinel.dir->path() / "sentinel.conf";
    std::ofstream(conf) << "port " << sentinel.port << "\nbind 127.0.0.1\n"
                        << "dir " << sentinel.dir->path().string() << "\n"
                        << "sentinel monitor " << options_.master_name << " 127.0.0.1 "
                        << master_port << ' ' << quorum << "\n"
                        << "sentinel down-after-milliseconds " << options_.master_name << " 1000\n"
                        << "sentinel failover-timeout " << options_.master_name << " 5000\n"
                        << "sentinel parallel-syncs " << options_.master_name << " 1\n";
    sentinel.process = ServerProcess({redis_server_path(), conf.string(), "--sentinel"},
                                     sentinel.dir->path() / "sentinel.log");
    sentinel.process.start();
    sentinels_.push_back(std::move(sentinel));
  }
  for (const Sentinel& sentinel : sentinels_) {
    if (!wait_for_port(sentinel.port, 10s)) {
      throw std::runtime_error("a sentinel did not start; logs:\n" + logs());
    }
    tune(sentinel.port);
  }
  wait_for_master(0, kSettle);
  // Each sentinel knows the others (hello messages over the master) and the replicas,
  // so that a failover can be agreed on.
  const auto deadline = std::chrono::steady_clock::now() + kSettle;
  for (const Sentinel& sentinel : sentinels_) {
    while (true) {
      // Each entry is a list of field/value pairs starting with "name": count the
      // "ip" fields.
      const auto entries = [&](const char* what) {
        const std::string text =
            redis_command(sentinel.port, {"SENTINEL", what, options_.master_name});
        std::size_t count = 0;
        for (std::size_t at = 0; (at = text.find("\nip\n", at)) != std::string::npos; ++at) {
          ++count;
        }
        return count;
      };
      const std::size_t replicas = entries("replicas");
      const std::size_t others = entries("sentinels");
      if (replicas >= static_cast<std::size_t>(options_.replicas) &&
          others + 1 >= sentinels_.size()) {
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("the sentinels did not find each other and the replicas (" +
                                 std::to_string(replicas) + " replicas, " + std::to_string(others) +
                                 " other sentinels); logs:\n" + logs());
      }
      std::this_thread::sleep_for(100ms);
    }
  }
}

RedisSentinelGroup::~RedisSentinelGroup() = default;

std::string RedisSentinelGroup::uri(std::string_view query) const {
  std::string out = "redis+sentinel://";
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (i > 0) out += ',';
    out += "127.0.0.1:" + std::to_string(sentinels_[i].port);
  }
  out += '/' + options_.master_name;
  if (!query.empty()) out += "?" + std::string(query);
  return out;
}

std::vector<std::uint16_t> RedisSentinelGroup::sentinel_ports() const {
  std::vector<std::uint16_t> ports;
  for (const Sentinel& sentinel : sentinels_) ports.push_back(sentinel.port);
  return ports;
}

std::vector<std::uint16_t> RedisSentinelGroup::data_ports() const {
  std::vector<std::uint16_t> ports;
  for (const auto& server : data_) ports.push_back(server->port());
  return ports;
}

std::string RedisSentinelGroup::command(std::uint16_t port, const std::vector<std::string>& args) {
  return redis_command(port, args);
}

RedisServer& RedisSentinelGroup::node(std::uint16_t port) {
  for (const auto& server : data_) {
    if (server->port() == port) return *server;
  }
  throw std::logic_error("no data node on port " + std::to_string(port));
}

void RedisSentinelGroup::wait_for_replicas(std::uint16_t master, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + kSettle;
  while (true) {
    std::string info;
    try {
      info = redis_command(master, {"INFO", "replication"}, 2s);
    } catch (const std::runtime_error&) {
    }
    std::size_t online = 0;
    for (std::size_t at = 0; (at = info.find("state=online", at)) != std::string::npos; ++at) {
      ++online;
    }
    if (online >= count) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("replicas did not come online:\n" + info + "\nlogs:\n" + logs());
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::uint16_t RedisSentinelGroup::wait_for_master(std::uint16_t old_port,
                                                  std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::uint16_t agreed = 0;
    bool all = true;
    for (Sentinel& sentinel : sentinels_) {
      if (!sentinel.process.running()) continue;
      const std::uint16_t named = named_master(sentinel.port, options_.master_name);
      // Settled: named, the same by all, not the old one, and not in doubt or moving.
      if (named == 0 || named == old_port || (agreed != 0 && named != agreed) ||
          master_flags(sentinel.port, options_.master_name) != "master") {
        all = false;
        break;
      }
      agreed = named;
    }
    if (all && agreed != 0 && says_master(agreed)) return agreed;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("the sentinels did not agree on a new master; logs:\n" + logs());
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::uint16_t RedisSentinelGroup::master_port() {
  for (const Sentinel& sentinel : sentinels_) {
    if (const std::uint16_t port = named_master(sentinel.port, options_.master_name)) return port;
  }
  throw std::runtime_error("no sentinel names the master");
}

std::uint16_t RedisSentinelGroup::failover() {
  const std::uint16_t old = master_port();
  // A sentinel refuses while it is still settling after an earlier failover: ask again.
  const auto deadline = std::chrono::steady_clock::now() + kSettle;
  while (true) {
    const std::string reply =
        redis_command(sentinels_.front().port, {"SENTINEL", "FAILOVER", options_.master_name});
    if (reply == "OK") break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("SENTINEL FAILOVER answered " + reply);
    }
    std::this_thread::sleep_for(200ms);
  }
  return wait_for_master(old, kSettle);
}

std::uint16_t RedisSentinelGroup::kill_master() {
  const std::uint16_t port = master_port();
  node(port).kill9();
  return port;
}

std::uint16_t RedisSentinelGroup::wait_for_new_master(std::uint16_t old_port) {
  return wait_for_master(old_port, kSettle);
}

void RedisSentinelGroup::restart_node(std::uint16_t port) {
  RedisServer& server = node(port);
  server.start();
  // The sentinels turn it into a replica of the current master.
  const auto deadline = std::chrono::steady_clock::now() + kSettle;
  while (true) {
    std::string info;
    try {
      info = redis_command(port, {"INFO", "replication"}, 2s);
    } catch (const std::runtime_error&) {
    }
    if (info.find("role:slave") != std::string::npos &&
        info.find("master_link_status:up") != std::string::npos) {
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("a restarted node did not become a replica:\n" + info);
    }
    std::this_thread::sleep_for(100ms);
  }
}

void RedisSentinelGroup::kill_sentinels() {
  for (Sentinel& sentinel : sentinels_) sentinel.process.kill9();
}

void RedisSentinelGroup::start_sentinels() {
  for (Sentinel& sentinel : sentinels_) sentinel.process.start();
  for (const Sentinel& sentinel : sentinels_) {
    if (!wait_for_port(sentinel.port, 10s)) {
      throw std::runtime_error("a sentinel did not start again; logs:\n" + logs());
    }
    tune(sentinel.port);
  }
}

std::string RedisSentinelGroup::logs() {
  std::string out;
  for (const Sentinel& sentinel : sentinels_) {
    std::string text = sentinel.process.log_text();
    if (text.size() > 2000) text = text.substr(text.size() - 2000);
    out += "--- sentinel " + std::to_string(sentinel.port) + "\n" + text;
  }
  return out;
}

void RedisSentinelGroup::pause_all() {
  for (auto& sentinel : sentinels_) sentinel.process.signal(SIGSTOP);
  for (auto& node : data_) node->pause();
}

void RedisSentinelGroup::pause_node(std::uint16_t port) { node(port).pause(); }

void RedisSentinelGroup::resume_node(std::uint16_t port) { node(port).resume(); }

void RedisSentinelGroup::resume_all() {
  for (auto& node : data_) node->resume();
  for (auto& sentinel : sentinels_) sentinel.process.signal(SIGCONT);
}

}  // namespace warden::testing
