// support/zookeeper_server.h — a throwaway Apache ZooKeeper ensemble for tests: one
// server (standalone) or several (a quorum), each a JVM on free loopback ports with its
// own config and data dir in a temp dir of its own, started and stopped by PID, and the
// ZooKeeper C client (libzookeeper_mt) to look behind the engine's back.
//
// Servers run Debian's ZooKeeper (/usr/share/java/zookeeper.jar, whose manifest names its
// dependencies, plus slf4j-simple for a log on stderr) under /usr/bin/java with a small
// heap and the C1 compiler only: one serves about half a second after it is started, an
// ensemble of three has a leader within about three seconds. Writes are not fsynced
// (forceSync=no): kill -9 keeps them, only a machine crash would not.
//
// The session timeout a client gets is clamped to 2..20 ticks (400..4000 ms with the
// default 200 ms tick). Followers drop a silent leader after 5 ticks (syncLimit), so a
// lost leader is replaced within about a second. Empty containers (that once had a
// child) are deleted by the leader's check every `container_check_ms`. Nothing here is
// thread-safe: one test thread drives the ensemble.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/server_process.h"

namespace warden::testing {

struct ZooKeeperOptions {
  // Number of servers: 1 runs standalone, more form an ensemble (3 in practice; any
  // n >= 1 works).
  int servers = 1;
  // tickTime. The session timeout a client may get is 2..20 ticks.
  int tick_ms = 200;
  // How often the leader deletes empty containers (znode.container.checkIntervalMs;
  // ZooKeeper's own default is a minute).
  int container_check_ms = 500;
};

class ZooKeeperEnsemble {
 public:
  // Starts every server and returns once each answers `srvr` as serving and, for an
  // ensemble, one of them leads. A server that cannot bind its ports moves the whole
  // ensemble to new ports, a couple of times. Throws std::runtime_error otherwise, with
  // the tail of the servers' logs in the message.
  explicit ZooKeeperEnsemble(ZooKeeperOptions options = {});
  ~ZooKeeperEnsemble();  // kill -9 every server; removes the temp dir with the data dirs
  ZooKeeperEnsemble(const ZooKeeperEnsemble&) = delete;
  ZooKeeperEnsemble& operator=(const ZooKeeperEnsemble&) = delete;

  int size() const { return static_cast<int>(servers_.size()); }
  std::uint16_t client_port(int server) const;
  // "127.0.0.1:P0,127.0.0.1:P1,...": the C client's connect string.
  std::string hosts() const;
  // "zk://127.0.0.1:P0,127.0.0.1:P1,..." followed by `prefix` (the URI's path, the node
  // every lock lives under) when not empty; a missing leading '/' is added.
  std::string uri(const std::string& prefix = "") const;

  // kill -9: the server is gone when it returns (its data dir stays).
  void kill9(int server);
  // Starts a server again after kill9() with the same data dir and ports; returns once it
  // serves (srvr). While too few other servers run (and are not paused) for a quorum, it
  // returns once it listens: a quorum member serves clients only once it has a leader.
  // Throws std::runtime_error if it does not come up.
  void start(int server);
  // SIGSTOP / SIGCONT. A paused server still accepts TCP connections (the kernel does)
  // but answers nothing. A client on it gives up after 2/3 of its session timeout and
  // moves to another server; its session survives if it gets there within the last third
  // (a paused follower no longer vouches for it), or if a paused leader is replaced
  // meanwhile (a new leader gives every session its full timeout again). A standalone
  // server resumed after more than a session timeout expires the sessions that have not
  // reconnected yet.
  void pause(int server);
  void resume(int server);
  bool running(int server);
  bool paused(int server) const;

  // Index of the current leader (standalone: 0), as the running, not paused servers see
  // it (the one that reports itself leader at the highest epoch). Retries for up to ~5 s
  // while an election is under way; throws std::runtime_error if there is none.
  int leader();

  // Direct access through the ZooKeeper C client (synchronous API), connected to the
  // running, not paused servers; `auth` ("user:password", may be empty) is added as
  // digest credentials first. Each call opens a session of its own and closes it again.
  // Throws std::runtime_error if no server accepts a session, or on an unexpected error.
  //
  // The names of the children of `path`, sorted; empty if `path` does not exist.
  std::vector<std::string> children(const std::string& path, const std::string& auth = "");
  bool exists(const std::string& path);
  // The data of `path`; nullopt if it does not exist.
  std::optional<std::string> data(const std::string& path);
  // Every znode under `path` (recursively, `path` itself excluded) as a full path, sorted;
  // /zookeeper and what is under it are left out. A node whose ACL does not let `auth`
  // (or anyone, without it) read its children makes it throw.
  std::vector<std::string> tree(const std::string& path = "/", const std::string& auth = "");
  // Deletes `path` whatever its version; returns the C client's code (ZOK, ZNONODE,
  // ZNOAUTH, ZNOTEMPTY, ...).
  int delete_node(const std::string& path, const std::string& auth = "");

  ServerProcess& process(int server);
  const ZooKeeperOptions& options() const { return options_; }

 private:
  struct Server {
    std::uint16_t client_port = 0;
    std::uint16_t peer_port = 0;
    std::uint16_t election_port = 0;
    ServerProcess process;
    bool paused = false;
  };
  // What `srvr` says of a serving server.
  struct Status {
    std::string mode;  // "standalone", "leader", "follower", "observer"
    std::uint64_t zxid = 0;
  };

  Server& at(int server);
  const Server& at(int server) const;
  // Starts every server on fresh ports; true once all serve, false if one could not bind.
  bool start_all();
  void write_config(int server) const;
  std::vector<int> reachable();   // running and not paused
  std::string reachable_hosts();  // their "127.0.0.1:P,..."
  // `srvr` on one server; nullopt if it does not answer (or is not serving yet).
  std::optional<Status> status(int server) const;
  bool port_taken(int server, std::size_t log_from = 0) const;
  std::string log_tails() const;

  ZooKeeperOptions options_;
  TempDir dir_;
  std::vector<Server> servers_;
};

// The JVM and the class path the servers run with.
std::string zookeeper_java_path();
std::string zookeeper_classpath();

// One four-letter word ("ruok", "srvr", "mntr", ...) sent to 127.0.0.1:port; the whole
// answer, or nullopt if the connection fails or the server does not close it within
// `timeout` (a paused server accepts but never answers).
std::optional<std::string> zookeeper_four_letter_word(std::uint16_t port, const std::string& word,
                                                      std::chrono::milliseconds timeout);

// The node under which the zk:// engine keeps every request of the lock (group, name):
// "PREFIX/GROUP/NAME'" (PREFIX "/warden" by default), where NAME' is the name with every
// byte outside [A-Za-z0-9_~-] percent-escaped (src/engines/zookeeper/lock_nodes.h).
inline std::string zk_lock_path(std::string_view group, std::string_view name,
                                std::string_view prefix = "/warden") {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string path(prefix);
  path += '/';
  path += group;
  path += '/';
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z') ||
        (byte >= '0' && byte <= '9') || c == '_' || c == '~' || c == '-') {
      path += c;
    } else {
      path += '%';
      path += kHex[byte >> 4];
      path += kHex[byte & 0xF];
    }
  }
  return path;
}

}  // namespace warden::testing
