#include "support/redis_cluster.h"

#include <csignal>

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/info_fields.h"
#include "support/redis_server.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kSlots = 16384;
constexpr auto kReplyTimeout = 5s;

struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, FreeReply>;

struct FreeContext {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, FreeContext>;

timeval to_timeval(std::chrono::milliseconds d) {
  return timeval{static_cast<time_t>(d.count() / 1000),
                 static_cast<suseconds_t>(d.count() % 1000 * 1000)};
}

// A connection to 127.0.0.1:port; throws std::runtime_error if there is none.
ContextPtr connect_to(std::uint16_t port) {
  ContextPtr c(redisConnectWithTimeout("127.0.0.1", port, to_timeval(2s)));
  if (!c || c->err != 0) {
    throw std::runtime_error("redis cluster: cannot connect to 127.0.0.1:" + std::to_string(port) +
                             ": " + (c ? c->errstr : "out of memory"));
  }
  redisSetTimeout(c.get(), to_timeval(kReplyTimeout));
  return c;
}

// One command on `c`; throws std::runtime_error on an I/O error.
ReplyPtr run(redisContext* c, std::uint16_t port, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  ReplyPtr r(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (!r) {
    throw std::runtime_error("redis cluster: no reply to " + args.at(0) +
                             " from 127.0.0.1:" + std::to_string(port) + ": " + c->errstr);
  }
  return r;
}

ReplyPtr run_once(std::uint16_t port, const std::vector<std::string>& args) {
  const ContextPtr c = connect_to(port);
  return run(c.get(), port, args);
}

std::string text_of(const redisReply* r) { return reply_text(r); }

// The port of a CLUSTER SLOTS node entry [host, port, id, ...].
std::uint16_t node_port(const redisReply* node) {
  if (node->type != REDIS_REPLY_ARRAY || node->elements < 2 ||
      node->element[1]->type != REDIS_REPLY_INTEGER) {
    throw std::runtime_error("redis cluster: unexpected node entry in CLUSTER SLOTS: " +
                             text_of(node));
  }
  return static_cast<std::uint16_t>(node->element[1]->integer);
}

std::string describe(const std::vector<ClusterSlotRange>& table) {
  std::string out;
  for (const auto& r : table) {
    out += std::to_string(r.first) + "-" + std::to_string(r.last) + "@" +
           std::to_string(r.master_port) + " ";
  }
  return out.empty() ? "(no slots)" : out;
}

void expect_ok(const std::string& reply, const std::string& what) {
  if (reply != "OK") throw std::runtime_error("redis cluster: " + what + " answered " + reply);
}

}  // namespace

std::string redis_cli_path() {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/redis-cli";
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "/usr/bin/redis-cli";
}

struct RedisClusterGroup::Node {
  Node() : dir("redis-cluster") {}

  TempDir dir;
  std::uint16_t port = 0;
  std::uint16_t bus_port = 0;  // --cluster-port: any free port, not port + 10000
  std::string id;
  ServerProcess process;  // declared after dir: killed before the dir goes
};

RedisClusterGroup::RedisClusterGroup(RedisClusterOptions options) : options_(options) {
  if (options_.masters < 3 || options_.masters > 16 || options_.replicas_per_master < 0 ||
      options_.replicas_per_master > 4) {
    throw std::invalid_argument("RedisClusterGroup: 3..16 masters with 0..4 replicas each");
  }
  start_nodes();
  create_cluster();
  wait_until_stable();
}

RedisClusterGroup::~RedisClusterGroup() = default;  // each ServerProcess kills its node

void RedisClusterGroup::start_nodes() {
  const int count = options_.masters * (1 + options_.replicas_per_master);
  std::set<std::uint16_t> taken;
  const auto pick_port = [&taken] {
    for (;;) {
      const std::uint16_t p = free_port();
      if (taken.insert(p).second) return p;
    }
  };
  for (int i = 0; i < count; ++i) {
    auto n = std::make_unique<Node>();
    // A free port may be taken by someone else before the node binds it: try others.
    for (int attempt = 0;; ++attempt) {
      n->port = pick_port();
      n->bus_port = pick_port();
      n->process =
          ServerProcess({redis_server_path(), "--port", std::to_string(n->port), "--cluster-port",
                         std::to_string(n->bus_port), "--bind", "127.0.0.1", "--dir",
                         n->dir.path().string(), "--cluster-enabled", "yes",
                         "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
                         // Sync a new replica at once, not after 5 s.
                         "--repl-diskless-sync-delay", "0", "--save", "", "--appendonly", "no",
                         "--protected-mode", "no", "--daemonize", "no", "--logfile", ""},
                        n->dir.path() / "redis.log");
      n->process.start();
      if (n->process.wait_for_log("Ready to accept connections", 10s) &&
          wait_for_port(n->port, 5s)) {
        break;
      }
      n->process.kill9();
      if (attempt == 4) {
        throw std::runtime_error("redis cluster: a node did not start; log:\n" +
                                 n->process.log_text());
      }
    }
    nodes_.push_back(std::move(n));
  }
}

void RedisClusterGroup::create_cluster() {
  TempDir cli_dir("redis-cluster-create");
  std::vector<std::string> argv = {redis_cli_path(), "--cluster", "create"};
  for (const auto& n : nodes_) argv.push_back("127.0.0.1:" + std::to_string(n->port));
  argv.insert(argv.end(), {"--cluster-replicas", std::to_string(options_.replicas_per_master),
                           "--cluster-yes"});
  ServerProcess cli(argv, cli_dir.path() / "create.log");
  cli.start();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (cli.running()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      cli.kill9();
      throw std::runtime_error("redis cluster: redis-cli --cluster create hung; output:\n" +
                               cli.log_text());
    }
    std::this_thread::sleep_for(20ms);
  }
  // redis-cli's exit status is not at hand (ServerProcess reaps it); what counts is the
  // cluster it left behind, which the stability wait checks. Its closing line says
  // whether it thinks it succeeded.
  const std::string output = cli.log_text();
  if (output.find("All 16384 slots covered") == std::string::npos) {
    throw std::runtime_error("redis cluster: redis-cli --cluster create failed; output:\n" +
                             output);
  }
  for (const auto& n : nodes_) {
    n->id = text_of(run_once(n->port, {"CLUSTER", "MYID"}).get());
  }
}

RedisClusterGroup::Node& RedisClusterGroup::node(std::uint16_t port) const {
  for (const auto& n : nodes_) {
    if (n->port == port) return *n;
  }
  throw std::invalid_argument("redis cluster: no node on port " + std::to_string(port));
}

std::string RedisClusterGroup::uri(std::string_view query) const {
  std::string uri = "redis+cluster://";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (i > 0) uri += ',';
    uri += "127.0.0.1:" + std::to_string(nodes_[i]->port);
  }
  if (!query.empty()) uri += "?" + std::string(query);
  return uri;
}

std::vector<std::uint16_t> RedisClusterGroup::node_ports() const {
  std::vector<std::uint16_t> ports;
  for (const auto& n : nodes_) ports.push_back(n->port);
  return ports;
}

std::vector<ClusterSlotRange> RedisClusterGroup::slot_table(std::uint16_t port) {
  const ReplyPtr r = run_once(port, {"CLUSTER", "SLOTS"});
  if (r->type != REDIS_REPLY_ARRAY) {
    throw std::runtime_error("redis cluster: CLUSTER SLOTS on " + std::to_string(port) +
                             " answered " + text_of(r.get()));
  }
  std::vector<ClusterSlotRange> table;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER) {
      throw std::runtime_error("redis cluster: unexpected CLUSTER SLOTS entry: " + text_of(e));
    }
    ClusterSlotRange range;
    range.first = static_cast<int>(e->element[0]->integer);
    range.last = static_cast<int>(e->element[1]->integer);
    range.master_port = node_port(e->element[2]);
    for (std::size_t j = 3; j < e->elements; ++j) {
      range.replica_ports.push_back(node_port(e->element[j]));
    }
    std::sort(range.replica_ports.begin(), range.replica_ports.end());
    table.push_back(std::move(range));
  }
  std::sort(table.begin(), table.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return table;
}

std::vector<ClusterSlotRange> RedisClusterGroup::any_slot_table() {
  std::string why = "no node is running";
  for (const auto& n : nodes_) {
    if (!n->process.running()) continue;
    try {
      return slot_table(n->port);
    } catch (const std::runtime_error& e) {
      why = e.what();
    }
  }
  throw std::runtime_error("redis cluster: no node answers CLUSTER SLOTS: " + why);
}

std::vector<std::uint16_t> RedisClusterGroup::master_ports() {
  std::set<std::uint16_t> masters;
  for (const auto& r : any_slot_table()) masters.insert(r.master_port);
  return {masters.begin(), masters.end()};
}

std::uint16_t RedisClusterGroup::master_port_for_slot(int slot) {
  if (slot < 0 || slot >= kSlots) throw std::invalid_argument("slot out of 0..16383");
  const auto table = any_slot_table();
  for (const auto& r : table) {
    if (r.first <= slot && slot <= r.last) return r.master_port;
  }
  throw std::runtime_error("redis cluster: no master serves slot " + std::to_string(slot) + ": " +
                           describe(table));
}

std::vector<ClusterNodeLine> RedisClusterGroup::cluster_nodes(std::uint16_t port) {
  std::vector<ClusterNodeLine> lines;
  std::istringstream text(command(port, {"CLUSTER", "NODES"}));
  for (std::string line; std::getline(text, line);) {
    // id ip:port@cport[,hostname] flags master_id ping_sent pong_recv epoch link slot...
    std::istringstream fields(line);
    ClusterNodeLine n;
    std::string address;
    if (!(fields >> n.id >> address >> n.flags >> n.master_id)) continue;
    const auto colon = address.find(':');
    const auto at = address.find('@');
    if (colon == std::string::npos || at == std::string::npos || at < colon) {
      throw std::runtime_error("redis cluster: unexpected CLUSTER NODES line: " + line);
    }
    n.port = static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1, at - colon - 1)));
    lines.push_back(std::move(n));
  }
  return lines;
}

std::vector<std::uint16_t> RedisClusterGroup::replica_ports_of(std::uint16_t master_port) {
  const std::string& master_id = node(master_port).id;
  for (const auto& n : nodes_) {
    if (!n->process.running()) continue;
    std::vector<std::uint16_t> replicas;
    try {
      for (const ClusterNodeLine& line : cluster_nodes(n->port)) {
        if (line.master_id == master_id && line.flags.find("slave") != std::string::npos &&
            line.flags.find("fail") == std::string::npos) {
          replicas.push_back(line.port);
        }
      }
    } catch (const std::runtime_error&) {
      continue;  // ask the next node
    }
    std::sort(replicas.begin(), replicas.end());
    return replicas;
  }
  throw std::runtime_error("redis cluster: no node answers CLUSTER NODES");
}

void RedisClusterGroup::kill_node(std::uint16_t port) {
  Node& n = node(port);
  std::vector<ClusterSlotRange> served;
  try {
    for (auto& r : slot_table(port)) {
      if (r.master_port == port) served.push_back(std::move(r));
    }
  } catch (const std::runtime_error&) {
    // Not answering: nothing to remember; wait_for_failover asks the others then.
  }
  served_when_killed_[port] = std::move(served);
  n.process.kill9();
}

void RedisClusterGroup::restart_node(std::uint16_t port) {
  Node& n = node(port);
  n.process.start();
  if (!n.process.wait_for_log("Ready to accept connections", 10s) || !wait_for_port(port, 5s)) {
    throw std::runtime_error("redis cluster: node " + std::to_string(port) +
                             " did not restart; log:\n" + n.process.log_text());
  }
  wait_until_stable();
}

bool RedisClusterGroup::running(std::uint16_t port) { return node(port).process.running(); }

std::uint16_t RedisClusterGroup::wait_for_failover(std::uint16_t old_master_port,
                                                   std::chrono::milliseconds timeout) {
  node(old_master_port);  // throws for a port that is no node
  if (options_.replicas_per_master == 0) {
    throw std::logic_error("redis cluster: no replicas, so no failover");
  }
  std::vector<ClusterSlotRange> served = served_when_killed_[old_master_port];
  if (served.empty()) {
    for (auto& r : any_slot_table()) {
      if (r.master_port == old_master_port) served.push_back(std::move(r));
    }
  }
  if (served.empty()) {
    throw std::logic_error("redis cluster: node " + std::to_string(old_master_port) +
                           " served no slots: nothing to fail over");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why;
  for (;;) {
    try {
      if (auto not_yet = unstable()) {
        why = *not_yet;
      } else {
        const std::uint16_t now = master_port_for_slot(served.front().first);
        if (now != old_master_port) return now;
        why = "slot " + std::to_string(served.front().first) + " still on the old master";
      }
    } catch (const std::runtime_error& e) {
      why = e.what();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("redis cluster: no failover of " + std::to_string(old_master_port) +
                               ": " + why);
    }
    std::this_thread::sleep_for(50ms);
  }
}

void RedisClusterGroup::migrate_slot(int slot, std::uint16_t to_port) {
  begin_migration(slot, to_port);
  finish_migration(slot, to_port);
}

void RedisClusterGroup::begin_migration(int slot, std::uint16_t to_port) {
  const std::uint16_t from = master_port_for_slot(slot);
  if (from == to_port) {
    throw std::logic_error("redis cluster: slot " + std::to_string(slot) + " is already on " +
                           std::to_string(to_port));
  }
  const std::string s = std::to_string(slot);
  // IMPORTING first: once the source says ASK, the target must accept the ASKING client.
  expect_ok(command(to_port, {"CLUSTER", "SETSLOT", s, "IMPORTING", node(from).id}),
            "SETSLOT IMPORTING");
  expect_ok(command(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", node(to_port).id}),
            "SETSLOT MIGRATING");
  migrating_from_[slot] = from;
}

void RedisClusterGroup::finish_migration(int slot, std::uint16_t to_port) {
  const auto it = migrating_from_.find(slot);
  if (it == migrating_from_.end()) {
    throw std::logic_error("redis cluster: finish_migration of slot " + std::to_string(slot) +
                           " without begin_migration");
  }
  const std::uint16_t from = it->second;
  const std::string s = std::to_string(slot);
  for (;;) {
    const ReplyPtr keys = run_once(from, {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (keys->type != REDIS_REPLY_ARRAY) {
      throw std::runtime_error("redis cluster: GETKEYSINSLOT answered " + text_of(keys.get()));
    }
    if (keys->elements == 0) break;
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0",
                                        "5000",    "KEYS"};
    for (std::size_t i = 0; i < keys->elements; ++i) {
      migrate.emplace_back(keys->element[i]->str, keys->element[i]->len);
    }
    const std::string moved = command(from, migrate);
    if (moved != "OK" && moved != "NOKEY") {
      throw std::runtime_error("redis cluster: MIGRATE answered " + moved);
    }
  }
  // The target first, so that it owns the slot before the source starts sending MOVED
  // there; then the source; then everyone else (they would also learn it by gossip).
  const std::string to_id = node(to_port).id;
  expect_ok(command(to_port, {"CLUSTER", "SETSLOT", s, "NODE", to_id}), "SETSLOT NODE (target)");
  expect_ok(command(from, {"CLUSTER", "SETSLOT", s, "NODE", to_id}), "SETSLOT NODE (source)");
  for (const std::uint16_t master : master_ports()) {
    if (master == to_port || master == from || !running(master)) continue;
    expect_ok(command(master, {"CLUSTER", "SETSLOT", s, "NODE", to_id}), "SETSLOT NODE");
  }
  migrating_from_.erase(it);

  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::string why;
  for (;;) {
    why.clear();
    for (const auto& n : nodes_) {
      if (!n->process.running()) continue;
      try {
        const auto table = slot_table(n->port);
        const auto range = std::find_if(table.begin(), table.end(), [&](const auto& r) {
          return r.first <= slot && slot <= r.last;
        });
        if (range == table.end() || range->master_port != to_port) {
          why = std::to_string(n->port) + " routes it elsewhere: " + describe(table);
        }
      } catch (const std::runtime_error& e) {
        why = e.what();
      }
      if (!why.empty()) break;
    }
    if (why.empty()) {
      if (auto not_yet = unstable()) {
        why = *not_yet;
      } else {
        return;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("redis cluster: slot " + s + " did not move to " +
                               std::to_string(to_port) + ": " + why);
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::optional<std::string> RedisClusterGroup::unstable() {
  // Whether one of this group's nodes runs on `port` (a node without an address shows
  // up with port 0).
  const auto is_running = [this](std::uint16_t port) {
    for (const auto& n : nodes_) {
      if (n->port == port) return n->process.running();
    }
    return false;
  };
  std::optional<std::vector<ClusterSlotRange>> agreed;
  std::map<std::uint16_t, std::vector<ClusterNodeLine>> views;  // by the viewer's port
  std::uint16_t agreed_by = 0;
  for (const auto& n : nodes_) {
    if (!n->process.running()) continue;
    const std::string at = "node " + std::to_string(n->port) + ": ";
    try {
      auto info = info_fields(command(n->port, {"CLUSTER", "INFO"}));
      if (info["cluster_state"] != "ok") return at + "cluster_state:" + info["cluster_state"];
      if (info["cluster_slots_ok"] != std::to_string(kSlots)) {
        return at + "cluster_slots_ok:" + info["cluster_slots_ok"];
      }
      if (info["cluster_known_nodes"] != std::to_string(nodes_.size())) {
        return at + "cluster_known_nodes:" + info["cluster_known_nodes"];
      }
      auto replication = info_fields(command(n->port, {"INFO", "replication"}));
      if (replication["role"] == "slave" && replication["master_link_status"] != "up") {
        return at + "replica link " + replication["master_link_status"];
      }
      std::vector<ClusterNodeLine> view = cluster_nodes(n->port);
      for (const ClusterNodeLine& line : view) {
        if (line.flags.find("fail") != std::string::npos && is_running(line.port)) {
          return at + "flags running node " + std::to_string(line.port) + " " + line.flags;
        }
      }
      views[n->port] = std::move(view);
      auto table = slot_table(n->port);
      // Replicas come and go from the lists as they sync; the masters must agree.
      for (auto& r : table) {
        r.replica_ports.clear();
        if (!is_running(r.master_port)) {
          return at + "routes slots to killed node " + std::to_string(r.master_port);
        }
      }
      if (!agreed) {
        agreed = std::move(table);
        agreed_by = n->port;
      } else if (table != *agreed) {
        return at + describe(table) + "but node " + std::to_string(agreed_by) + ": " +
               describe(*agreed);
      }
    } catch (const std::runtime_error& e) {
      return at + e.what();
    }
  }
  if (!agreed) return "no node is running";
  // Every running node's role, as it says itself, is known to all the others: a replica
  // that is told to follow a master knows it before gossip tells the rest.
  for (const auto& [self_port, self_view] : views) {
    const auto self = std::find_if(self_view.begin(), self_view.end(), [](const auto& line) {
      return line.flags.find("myself") != std::string::npos;
    });
    if (self == self_view.end()) return "node " + std::to_string(self_port) + ": no myself line";
    for (const auto& [port, view] : views) {
      const auto seen = std::find_if(view.begin(), view.end(),
                                     [&](const auto& line) { return line.id == self->id; });
      if (seen == view.end() || seen->master_id != self->master_id ||
          (seen->flags.find("slave") == std::string::npos) !=
              (self->flags.find("slave") == std::string::npos)) {
        return "node " + std::to_string(port) + " does not yet see node " +
               std::to_string(self_port) + " as " + self->flags + " of " + self->master_id;
      }
    }
  }
  return std::nullopt;
}

void RedisClusterGroup::wait_until_stable(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto why = unstable();
    if (!why) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("redis cluster: not stable: " + *why);
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::vector<std::string> RedisClusterGroup::commands(
    std::uint16_t port, const std::vector<std::vector<std::string>>& commands) {
  const ContextPtr c = connect_to(port);
  std::vector<std::string> replies;
  for (const auto& args : commands) replies.push_back(text_of(run(c.get(), port, args).get()));
  return replies;
}

std::string RedisClusterGroup::command(std::uint16_t port, const std::vector<std::string>& args) {
  return text_of(run_once(port, args).get());
}

const std::string& RedisClusterGroup::node_id(std::uint16_t port) const { return node(port).id; }

std::string RedisClusterGroup::log_text(std::uint16_t port) const {
  return node(port).process.log_text();
}

void RedisClusterGroup::pause_all() {
  for (auto& node : nodes_) node->process.signal(SIGSTOP);
}

void RedisClusterGroup::resume_all() {
  for (auto& node : nodes_) node->process.signal(SIGCONT);
}

}  // namespace warden::testing
