// support/redis_sentinel.h — a throwaway Redis deployment behind Sentinel for tests: one
// master, its replicas (each a RedisServer with --replicaof) and sentinels
// (`redis-server sentinel.conf --sentinel`, each with a temp dir and a config file it
// rewrites), all on free loopback ports, stopped by PID on destruction.
//
// The constructor returns once every replica is in sync and every sentinel names the
// master; failover() and kill_master() return once every running sentinel names the
// new master and that server says ROLE master. The helpers talk to the servers with
// hiredis directly, never through warden. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/redis_server.h"
#include "support/server_process.h"

namespace warden::testing {

struct RedisSentinelOptions {
  int replicas = 2;
  int sentinels = 3;  // quorum: min(2, sentinels)
  std::string master_name = "wmaster";
};

class RedisSentinelGroup {
 public:
  // Throws std::runtime_error (with the logs' tails) if the deployment does not come up.
  explicit RedisSentinelGroup(RedisSentinelOptions options = {});
  ~RedisSentinelGroup();
  RedisSentinelGroup(const RedisSentinelGroup&) = delete;
  RedisSentinelGroup& operator=(const RedisSentinelGroup&) = delete;

  // "redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,.../NAME[?query]".
  std::string uri(std::string_view query = "") const;
  const std::string& master_name() const { return options_.master_name; }
  std::vector<std::uint16_t> sentinel_ports() const;
  std::vector<std::uint16_t> data_ports() const;

  // The master as the first sentinel that answers names it.
  std::uint16_t master_port();
  // SENTINEL FAILOVER, then waits for the new master (see above); returns its port.
  std::uint16_t failover();
  // kill -9 of the current master; returns its port. wait_for_new_master(old) then
  // waits until the sentinels promoted a replica; returns its port.
  std::uint16_t kill_master();
  std::uint16_t wait_for_new_master(std::uint16_t old_port);
  // Starts a killed data node again on its port (the sentinels make it a replica).
  void restart_node(std::uint16_t port);
  void kill_sentinels();
  void start_sentinels();
  // SIGSTOP / SIGCONT of every data node and sentinel: the whole deployment frozen.
  void pause_all();
  void resume_all();
  // SIGSTOP / SIGCONT of the data node on `port` alone (a frozen replica, say).
  void pause_node(std::uint16_t port);
  void resume_node(std::uint16_t port);

  // One command to the data node or sentinel on `port`; the reply as RedisProbe::command
  // formats it. Throws std::runtime_error if the server cannot be reached.
  std::string command(std::uint16_t port, const std::vector<std::string>& args);

 private:
  struct Sentinel {
    std::uint16_t port = 0;
    std::unique_ptr<TempDir> dir;
    ServerProcess process;
  };

  RedisServer& node(std::uint16_t port);
  void wait_for_replicas(std::uint16_t master, std::size_t count);
  // Waits until every running sentinel names a master other than `old_port` (any, when
  // 0) that says ROLE master; returns it.
  std::uint16_t wait_for_master(std::uint16_t old_port, std::chrono::seconds timeout);
  std::string logs();

  RedisSentinelOptions options_;
  std::vector<std::unique_ptr<RedisServer>> data_;
  std::vector<Sentinel> sentinels_;
};

}  // namespace warden::testing
