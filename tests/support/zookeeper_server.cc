#include "support/zookeeper_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace warden::testing {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// How long a server (or the whole ensemble) may take to serve after it was started.
constexpr auto kStartLimit = 30s;
// How long leader() waits for an election to end.
constexpr auto kElectionLimit = 5s;
// One `srvr` probe: a server answers within milliseconds unless paused or just starting.
constexpr auto kProbeTimeout = 1s;
// How long a direct read retries while sessions fail (no server answers, one was paused
// under the session, an election is under way).
constexpr auto kClientLimit = 15s;
// The session timeout the direct client asks for; the servers clamp it to 2..20 ticks.
constexpr int kClientSessionMs = 4000;
constexpr int kStartAttempts = 3;
constexpr int kRestartAttempts = 5;
constexpr const char* kPortTaken = "Address already in use";
constexpr const char* kJava = "/usr/bin/java";
constexpr const char* kJarDir = "/usr/share/java";

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

// The rest of the line after "name: " in `text`; empty if there is none.
std::string field(std::string_view text, std::string_view name) {
  const std::string key = std::string(name) + ": ";
  for (std::size_t pos = 0; pos < text.size();) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    if (line.starts_with(key)) {
      std::string value(line.substr(key.size()));
      while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
      return value;
    }
    pos = end + 1;
  }
  return {};
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

// A session-level failure: the same call on a new session may succeed.
bool transient(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED ||
         rc == ZSESSIONMOVED || rc == ZINVALIDSTATE || rc == ZCLOSING;
}

std::string zk_error(int rc) { return std::string(zerror(rc)) + " (" + std::to_string(rc) + ")"; }

// One session through the C client (THREADED: the client's own I/O and completion
// threads), with optional digest credentials. Calls on it use the synchronous API.
class ZkClient {
 public:
  // Throws std::runtime_error if no server of `hosts` gives it a session in `limit`.
  ZkClient(const std::string& hosts, const std::string& auth, std::chrono::milliseconds limit) {
    static std::once_flag quiet;
    // The C client logs every connection attempt to stderr by default.
    std::call_once(quiet, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR); });
    handle_ =
        zookeeper_init(hosts.c_str(), &ZkClient::on_event, kClientSessionMs, nullptr, this, 0);
    if (handle_ == nullptr) throw std::runtime_error("zookeeper_init failed for " + hosts);
    try {
      establish(hosts, auth, limit);
    } catch (...) {
      zookeeper_close(handle_);
      throw;
    }
  }
  // No callback runs after zookeeper_close returns: the members it uses are still alive.
  ~ZkClient() { zookeeper_close(handle_); }
  ZkClient(const ZkClient&) = delete;
  ZkClient& operator=(const ZkClient&) = delete;

  zhandle_t* handle() const { return handle_; }

 private:
  void establish(const std::string& hosts, const std::string& auth,
                 std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, limit, [this] { return state_ == ZOO_CONNECTED_STATE; })) {
      throw std::runtime_error("no ZooKeeper server of " + hosts + " gave a session within " +
                               std::to_string(limit.count()) + " ms");
    }
    if (auth.empty()) return;
    lock.unlock();
    const int rc = zoo_add_auth(
        handle_, "digest", auth.data(), static_cast<int>(auth.size()),
        [](int result, const void* data) {
          auto* self = static_cast<ZkClient*>(const_cast<void*>(data));
          const std::lock_guard guard(self->mu_);
          self->auth_rc_ = result;
          self->changed_.notify_all();
        },
        this);
    if (rc != ZOK) throw std::runtime_error("zoo_add_auth: " + zk_error(rc));
    lock.lock();
    if (!changed_.wait_for(lock, limit, [this] { return auth_rc_.has_value(); })) {
      throw std::runtime_error("digest auth got no answer within " + std::to_string(limit.count()) +
                               " ms");
    }
    if (*auth_rc_ != ZOK) throw std::runtime_error("digest auth failed: " + zk_error(*auth_rc_));
  }

  static void on_event(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* self = static_cast<ZkClient*>(context);
    const std::lock_guard guard(self->mu_);
    self->state_ = state;
    self->changed_.notify_all();
  }

  zhandle_t* handle_ = nullptr;
  std::mutex mu_;
  std::condition_variable changed_;
  int state_ = 0;
  std::optional<int> auth_rc_;
};

// The children's names of `path`; rc is the C client's code.
int get_children(zhandle_t* zh, const std::string& path, std::vector<std::string>& names) {
  String_vector strings{};
  const int rc = zoo_get_children(zh, path.c_str(), 0, &strings);
  if (rc == ZOK) {
    for (std::int32_t i = 0; i < strings.count; ++i) names.emplace_back(strings.data[i]);
    deallocate_String_vector(&strings);
  }
  return rc;
}

// Runs `call` on a fresh session to `hosts()` of the moment (the running, not paused
// servers), again on a new session while it fails with a session-level code, for up to
// kClientLimit. Returns the last code.
int with_session(const std::function<std::string()>& hosts, const std::string& auth,
                 const std::function<int(zhandle_t*)>& call) {
  const auto deadline = SteadyClock::now() + kClientLimit;
  std::string last_error;
  while (true) {
    const std::string connect_string = hosts();
    if (!connect_string.empty()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
      try {
        const ZkClient client(connect_string, auth, std::max(left, 1ms));
        const int rc = call(client.handle());
        if (!transient(rc)) return rc;
        last_error = zk_error(rc);
      } catch (const std::runtime_error& e) {
        last_error = e.what();
      }
    } else {
      last_error = "no ZooKeeper server is running (and not paused)";
    }
    if (SteadyClock::now() >= deadline) {
      throw std::runtime_error("ZooKeeper client gave up after " +
                               std::to_string(kClientLimit.count()) + " s: " + last_error);
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::string child_path(const std::string& parent, const std::string& name) {
  return parent == "/" ? "/" + name : parent + "/" + name;
}

}  // namespace

std::string zookeeper_java_path() { return kJava; }

std::string zookeeper_classpath() {
  // zookeeper.jar's manifest lists its dependencies (jute, netty, slf4j-api, jetty, ...);
  // it names no slf4j binding, and without one the server logs nothing.
  return std::string(kJarDir) + "/zookeeper.jar:" + kJarDir + "/slf4j-simple.jar";
}

std::optional<std::string> zookeeper_four_letter_word(std::uint16_t port, const std::string& word,
                                                      std::chrono::milliseconds timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // On loopback, connect() answers at once: refused, or accepted by the kernel's backlog
  // (even for a stopped process).
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      send(fd, word.data(), word.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(word.size())) {
    close(fd);
    return std::nullopt;
  }
  // The server writes the answer and closes the connection. While a server starts, it
  // may fail to close it (ZooKeeper 3.8 logs "Error closing a command socket"), so an
  // answer without the close does not count.
  std::string out;
  const auto deadline = SteadyClock::now() + timeout;
  char buffer[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left <= 0ms) break;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    close(fd);
    if (n == 0 || !out.empty()) return out;  // closed (a reset after the answer counts)
    return std::nullopt;
  }
  close(fd);
  return std::nullopt;
}

ZooKeeperEnsemble::ZooKeeperEnsemble(ZooKeeperOptions options)
    : options_(options), dir_("zookeeper") {
  if (options_.servers < 1) {
    throw std::invalid_argument("ZooKeeperEnsemble needs at least 1 server");
  }
  if (options_.tick_ms < 1 || options_.container_check_ms < 1) {
    throw std::invalid_argument("ZooKeeperEnsemble: tick_ms and container_check_ms must be > 0");
  }
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    if (start_all()) return;
  }
  throw std::runtime_error("ZooKeeper servers could not bind their ports in " +
                           std::to_string(kStartAttempts) + " attempts; logs:\n" + log_tails());
}

ZooKeeperEnsemble::~ZooKeeperEnsemble() {
  for (auto& s : servers_) s.process.kill9();
}

ZooKeeperEnsemble::Server& ZooKeeperEnsemble::at(int server) {
  if (server < 0 || server >= size()) {
    throw std::out_of_range("no ZooKeeper server " + std::to_string(server));
  }
  return servers_[static_cast<std::size_t>(server)];
}

const ZooKeeperEnsemble::Server& ZooKeeperEnsemble::at(int server) const {
  if (server < 0 || server >= size()) {
    throw std::out_of_range("no ZooKeeper server " + std::to_string(server));
  }
  return servers_[static_cast<std::size_t>(server)];
}

void ZooKeeperEnsemble::write_config(int server) const {
  const auto dir = dir_.path() / ("zk" + std::to_string(server));
  const auto data_dir = dir / "data";
  std::filesystem::create_directories(data_dir);
  const Server& s = servers_[static_cast<std::size_t>(server)];
  // Keys ZooKeeper does not know itself (admin.enableServer, 4lw.commands.whitelist,
  // forceSync) become the system properties "zookeeper.KEY".
  std::string cfg = "tickTime=" + std::to_string(options_.tick_ms) +
                    "\n"
                    "initLimit=10\n"
                    "syncLimit=5\n"
                    "dataDir=" +
                    data_dir.string() +
                    "\n"
                    "clientPort=" +
                    std::to_string(s.client_port) +
                    "\n"
                    "clientPortAddress=127.0.0.1\n"
                    "admin.enableServer=false\n"
                    "4lw.commands.whitelist=*\n"
                    "forceSync=no\n";
  if (size() == 1) {
    cfg += "standaloneEnabled=true\n";
  } else {
    for (int i = 0; i < size(); ++i) {
      const Server& peer = servers_[static_cast<std::size_t>(i)];
      cfg += "server." + std::to_string(i + 1) + "=127.0.0.1:" + std::to_string(peer.peer_port) +
             ":" + std::to_string(peer.election_port) + "\n";
    }
    write_file(data_dir / "myid", std::to_string(server + 1) + "\n");
  }
  write_file(dir / "zoo.cfg", cfg);
}

bool ZooKeeperEnsemble::start_all() {
  for (auto& s : servers_) s.process.kill9();
  servers_.clear();
  const int n = options_.servers;
  std::set<std::uint16_t> taken;
  auto fresh_port = [&taken] {
    while (true) {
      const std::uint16_t p = free_port();
      if (taken.insert(p).second) return p;
    }
  };
  for (int i = 0; i < n; ++i) {
    Server s;
    s.client_port = fresh_port();
    if (n > 1) {
      s.peer_port = fresh_port();
      s.election_port = fresh_port();
    }
    servers_.push_back(std::move(s));
  }
  for (int i = 0; i < n; ++i) {
    const std::string name = "zk" + std::to_string(i);
    const auto dir = dir_.path() / name;
    const auto log = dir_.path() / (name + ".log");
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);  // left by an earlier attempt
    std::filesystem::remove(log, ignored);
    write_config(i);
    // A small heap, the serial collector and the C1 compiler only: a test server needs
    // little, and the JVM then starts in about half a second. No perf data file under
    // /tmp/hsperfdata_USER (a kill -9 would leave it behind), crash reports in the dir.
    std::vector<std::string> argv = {
        zookeeper_java_path(),
        "-Xms16m",
        "-Xmx128m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Xshare:auto",
        "-XX:-UsePerfData",
        "-XX:ErrorFile=" + (dir / "hs_err_%p.log").string(),
        "-Djava.io.tmpdir=" + dir.string(),
        "-Dzookeeper.log.dir=" + dir.string(),
        "-Dzookeeper.jmx.log4j.disable=true",
        "-Dznode.container.checkIntervalMs=" + std::to_string(options_.container_check_ms),
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        "-Dorg.slf4j.simpleLogger.showShortLogName=true",
        "-cp",
        zookeeper_classpath(),
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        (dir / "zoo.cfg").string()};
    servers_[static_cast<std::size_t>(i)].process = ServerProcess(std::move(argv), log);
  }
  // All at once: the members of an ensemble need each other to elect a leader.
  for (auto& s : servers_) s.process.start();

  const auto deadline = SteadyClock::now() + kStartLimit;
  while (true) {
    for (int i = 0; i < n; ++i) {
      if (port_taken(i)) return false;
      if (!servers_[static_cast<std::size_t>(i)].process.running()) {
        throw std::runtime_error("ZooKeeper server zk" + std::to_string(i) +
                                 " exited during start; logs:\n" + log_tails());
      }
    }
    int serving = 0;
    int leaders = 0;
    for (int i = 0; i < n; ++i) {
      const auto st = status(i);
      if (!st) break;
      ++serving;
      if (st->mode == "leader" || st->mode == "standalone") ++leaders;
    }
    if (serving == n && leaders == 1) return true;
    if (SteadyClock::now() >= deadline) {
      throw std::runtime_error("ZooKeeper " + std::string(n == 1 ? "server" : "ensemble") +
                               " did not serve within " + std::to_string(kStartLimit.count()) +
                               " s; logs:\n" + log_tails());
    }
    std::this_thread::sleep_for(20ms);
  }
}

std::uint16_t ZooKeeperEnsemble::client_port(int server) const { return at(server).client_port; }

std::string ZooKeeperEnsemble::hosts() const {
  std::vector<std::string> endpoints;
  for (const auto& s : servers_) endpoints.push_back("127.0.0.1:" + std::to_string(s.client_port));
  return join(endpoints, ",");
}

std::string ZooKeeperEnsemble::uri(const std::string& prefix) const {
  std::string text = "zk://" + hosts();
  if (!prefix.empty()) {
    if (prefix.front() != '/') text += '/';
    text += prefix;
  }
  return text;
}

void ZooKeeperEnsemble::kill9(int server) {
  Server& s = at(server);
  s.process.kill9();
  s.paused = false;
}

void ZooKeeperEnsemble::start(int server) {
  Server& s = at(server);
  s.paused = false;
  const int quorum = size() / 2 + 1;
  for (int attempt = 0; attempt < kRestartAttempts; ++attempt) {
    // Only what this start writes to the log counts (the log keeps earlier runs).
    const std::size_t log_before = s.process.log_text().size();
    s.process.start();
    const auto deadline = SteadyClock::now() + kStartLimit;
    bool lost_port = false;
    while (true) {
      if (port_taken(server, log_before)) {
        s.process.kill9();
        lost_port = true;
        break;
      }
      if (!s.process.running()) {
        throw std::runtime_error("ZooKeeper server zk" + std::to_string(server) +
                                 " exited during restart; logs:\n" + log_tails());
      }
      if (wait_for_port(s.client_port, 1ms)) {
        const std::vector<int> up = reachable();
        const int others = static_cast<int>(
            std::count_if(up.begin(), up.end(), [server](int i) { return i != server; }));
        // Without a quorum it cannot serve yet: it listens and waits for a leader.
        if (others + 1 < quorum || status(server)) return;
      }
      if (SteadyClock::now() >= deadline) {
        throw std::runtime_error("ZooKeeper server zk" + std::to_string(server) +
                                 " did not serve after restart within " +
                                 std::to_string(kStartLimit.count()) + " s; logs:\n" + log_tails());
      }
      std::this_thread::sleep_for(20ms);
    }
    if (lost_port) std::this_thread::sleep_for(200ms);
  }
  throw std::runtime_error("ZooKeeper server zk" + std::to_string(server) +
                           " could not bind its ports again; logs:\n" + log_tails());
}

void ZooKeeperEnsemble::pause(int server) {
  Server& s = at(server);
  if (!s.process.running()) return;
  s.process.signal(SIGSTOP);
  s.paused = true;
}

void ZooKeeperEnsemble::resume(int server) {
  Server& s = at(server);
  s.process.signal(SIGCONT);
  s.paused = false;
}

bool ZooKeeperEnsemble::running(int server) { return at(server).process.running(); }

bool ZooKeeperEnsemble::paused(int server) const { return at(server).paused; }

ServerProcess& ZooKeeperEnsemble::process(int server) { return at(server).process; }

std::vector<int> ZooKeeperEnsemble::reachable() {
  std::vector<int> up;
  for (int i = 0; i < size(); ++i) {
    Server& s = servers_[static_cast<std::size_t>(i)];
    if (s.process.running() && !s.paused) up.push_back(i);
  }
  return up;
}

std::string ZooKeeperEnsemble::reachable_hosts() {
  std::vector<std::string> endpoints;
  for (const int i : reachable()) {
    endpoints.push_back("127.0.0.1:" + std::to_string(client_port(i)));
  }
  return join(endpoints, ",");
}

std::optional<ZooKeeperEnsemble::Status> ZooKeeperEnsemble::status(int server) const {
  const auto answer = zookeeper_four_letter_word(at(server).client_port, "srvr", kProbeTimeout);
  // A server without a quorum answers "This ZooKeeper instance is not currently serving
  // requests" instead.
  if (!answer) return std::nullopt;
  Status st;
  st.mode = field(*answer, "Mode");
  if (st.mode.empty()) return std::nullopt;
  const std::string zxid = field(*answer, "Zxid");
  try {
    st.zxid = zxid.empty() ? 0 : std::stoull(zxid, nullptr, 16);  // "0x..."
  } catch (const std::exception&) {
    st.zxid = 0;
  }
  return st;
}

int ZooKeeperEnsemble::leader() {
  const auto deadline = SteadyClock::now() + kElectionLimit;
  std::string last;
  while (true) {
    const std::vector<int> up = reachable();
    if (up.empty())
      throw std::runtime_error("leader(): no ZooKeeper server is running (and not paused)");
    int best = -1;
    std::uint64_t best_epoch = 0;
    last.clear();
    for (const int i : up) {
      const auto st = status(i);
      last += " zk" + std::to_string(i) + "=" + (st ? st->mode : "not serving");
      if (!st || (st->mode != "leader" && st->mode != "standalone")) continue;
      // A leader that was paused may still call itself leader for a moment after it
      // resumes; the one elected since has the higher epoch (the zxid's high 32 bits).
      const std::uint64_t epoch = st->zxid >> 32;
      if (best < 0 || epoch > best_epoch) {
        best = i;
        best_epoch = epoch;
      }
    }
    if (best >= 0) return best;
    if (SteadyClock::now() >= deadline) {
      throw std::runtime_error("no ZooKeeper leader within " +
                               std::to_string(kElectionLimit.count()) + " s; last seen:" + last);
    }
    std::this_thread::sleep_for(20ms);
  }
}

std::vector<std::string> ZooKeeperEnsemble::children(const std::string& path,
                                                     const std::string& auth) {
  std::vector<std::string> names;
  const auto list = [&](zhandle_t* zh) {
    names.clear();
    return get_children(zh, path, names);
  };
  const int rc = with_session([this] { return reachable_hosts(); }, auth, list);
  if (rc == ZNONODE) return {};
  if (rc != ZOK) throw std::runtime_error("get_children " + path + ": " + zk_error(rc));
  std::sort(names.begin(), names.end());
  return names;
}

bool ZooKeeperEnsemble::exists(const std::string& path) {
  const auto exists = [&](zhandle_t* zh) {
    Stat stat{};
    return zoo_exists(zh, path.c_str(), 0, &stat);
  };
  const int rc = with_session([this] { return reachable_hosts(); }, "", exists);
  if (rc == ZOK) return true;
  if (rc == ZNONODE) return false;
  throw std::runtime_error("exists " + path + ": " + zk_error(rc));
}

std::optional<std::string> ZooKeeperEnsemble::data(const std::string& path) {
  std::string out;
  const auto read = [&](zhandle_t* zh) {
    std::vector<char> buffer(1 << 20);  // ZooKeeper's own limit on a node's data
    int length = static_cast<int>(buffer.size());
    Stat stat{};
    const int rc = zoo_get(zh, path.c_str(), 0, buffer.data(), &length, &stat);
    if (rc == ZOK) out.assign(buffer.data(), length > 0 ? static_cast<std::size_t>(length) : 0);
    return rc;
  };
  const int rc = with_session([this] { return reachable_hosts(); }, "", read);
  if (rc == ZNONODE) return std::nullopt;
  if (rc != ZOK) throw std::runtime_error("get " + path + ": " + zk_error(rc));
  return out;
}

std::vector<std::string> ZooKeeperEnsemble::tree(const std::string& path, const std::string& auth) {
  std::vector<std::string> nodes;
  std::string failed;
  const auto walk = [&](zhandle_t* zh) {
    nodes.clear();
    std::vector<std::string> pending = {path};
    while (!pending.empty()) {
      const std::string parent = std::move(pending.back());
      pending.pop_back();
      std::vector<std::string> names;
      const int rc = get_children(zh, parent, names);
      if (rc == ZNONODE) continue;  // gone meanwhile (or `path` does not exist)
      if (rc != ZOK) {
        failed = parent;
        return rc;
      }
      for (const auto& name : names) {
        const std::string full = child_path(parent, name);
        if (full == "/zookeeper") continue;
        nodes.push_back(full);
        pending.push_back(full);
      }
    }
    return static_cast<int>(ZOK);
  };
  const int rc = with_session([this] { return reachable_hosts(); }, auth, walk);
  if (rc != ZOK) throw std::runtime_error("get_children " + failed + ": " + zk_error(rc));
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

int ZooKeeperEnsemble::delete_node(const std::string& path, const std::string& auth) {
  // Not repeated after a lost connection: the first delete may have happened, and a
  // second would answer ZNONODE for it.
  const std::string connect_string = reachable_hosts();
  if (connect_string.empty()) {
    throw std::runtime_error("delete_node: no ZooKeeper server is running (and not paused)");
  }
  const ZkClient client(connect_string, auth, kClientLimit);
  return zoo_delete(client.handle(), path.c_str(), -1);
}

bool ZooKeeperEnsemble::port_taken(int server, std::size_t log_from) const {
  const std::string log = at(server).process.log_text();
  return log.find(kPortTaken, std::min(log_from, log.size())) != std::string::npos;
}

std::string ZooKeeperEnsemble::log_tails() const {
  std::string text;
  for (int i = 0; i < size(); ++i) {
    text += "--- zookeeper zk" + std::to_string(i) + " ---\n";
    text += tail(servers_[static_cast<std::size_t>(i)].process.log_text(), 20);
    if (!text.empty() && text.back() != '\n') text += '\n';
  }
  return text;
}

}  // namespace warden::testing
