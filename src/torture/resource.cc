#include "torture/resource.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "torture/clock.h"
#include "torture/history.h"
#include "torture/stop_signal.h"
#include "warden/fence_gate.h"

namespace warden::torture {
namespace {

constexpr const char* kLock = "torture";

struct OpenWrite {
  int client = -1;
  std::uint64_t token = 0;
  Nanos start = 0;
  bool admitted = false;
};

struct Connection {
  int fd = -1;
  std::string in;
  std::optional<OpenWrite> write;  // this connection's write under way
};

class Resource {
 public:
  explicit Resource(const ResourceOptions& options)
      : out_(options.history_path), fenced_(options.fenced) {
    if (!out_) throw std::runtime_error("cannot write " + options.history_path);
  }

  // One request line -> its reply line.
  std::string handle(Connection& conn, const std::string& line) {
    std::istringstream words(line);
    std::string verb;
    words >> verb;
    if (verb == "BEGIN" || verb == "END") {
      int client = -1;
      std::uint64_t token = 0;
      if (!(words >> client >> token) || client < 0) return "ERR usage: " + verb + " CLIENT TOKEN";
      const bool admitted = !fenced_ || gate_.admit(kLock, token);
      if (verb == "BEGIN") {
        if (conn.write) finish(conn, now_ns());
        conn.write = OpenWrite{client, token, now_ns(), admitted};
        last_begun_ = conn.fd;
      } else {
        if (!conn.write || conn.write->client != client || conn.write->token != token) {
          return "ERR no write of that client and token under way";
        }
        conn.write->admitted = conn.write->admitted && admitted;
        finish(conn, now_ns());
      }
      return admitted ? "OK" : "REJECTED";
    }
    if (verb == "HOLDER") return std::to_string(holder());
    if (verb == "STATS") return std::to_string(writes_) + " " + std::to_string(rejected_);
    return "ERR unknown request";
  }

  // Records the connection's open write as ended at `end`.
  void finish(Connection& conn, Nanos end) {
    if (!conn.write) return;
    Event event;
    event.kind = EventKind::write;
    event.client = conn.write->client;
    event.token = conn.write->token;
    event.time = event.start = conn.write->start;
    event.end = end;
    event.accepted = conn.write->admitted;
    write_event(out_, event);
    out_.flush();
    ++writes_;
    if (!event.accepted) ++rejected_;
    conn.write.reset();
  }

  void forget(int fd) {
    if (last_begun_ == fd) last_begun_ = -1;
  }

  std::map<int, Connection> connections;

 private:
  int holder() const {
    const auto it = connections.find(last_begun_);
    if (it == connections.end() || !it->second.write) return -1;
    return it->second.write->client;
  }

  std::ofstream out_;
  const bool fenced_;
  FenceGate gate_;
  long writes_ = 0;
  long rejected_ = 0;
  int last_begun_ = -1;
};

int listen_on(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    throw std::runtime_error("socket path too long: " + path);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  ::unlink(path.c_str());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot listen on " + path + ": " + why);
  }
  return fd;
}

}  // namespace

int run_resource(const ResourceOptions& options) {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Resource resource(options);
  const int listener = listen_on(options.socket_path);
  std::vector<pollfd> fds;
  char buffer[4096];
  while (!stop_signalled) {
    fds.assign(1, pollfd{listener, POLLIN, 0});
    for (const auto& [fd, conn] : resource.connections) fds.push_back(pollfd{fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 200) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) resource.connections[fd] = Connection{fd, {}, std::nullopt};
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Connection& conn = resource.connections[fds[i].fd];
      const ssize_t n = ::read(conn.fd, buffer, sizeof(buffer));
      if (n <= 0) {
        // The client went away; a write it had under way ends now.
        resource.finish(conn, now_ns());
        resource.forget(conn.fd);
        ::close(conn.fd);
        resource.connections.erase(fds[i].fd);
        continue;
      }
      conn.in.append(buffer, static_cast<std::size_t>(n));
      std::size_t newline;
      while ((newline = conn.in.find('\n')) != std::string::npos) {
        const std::string reply = resource.handle(conn, conn.in.substr(0, newline)) + "\n";
        conn.in.erase(0, newline + 1);
        (void)::send(conn.fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      if (conn.in.size() > 4096) conn.in.clear();  // no line is that long: junk
    }
  }
  const Nanos end = now_ns();
  for (auto& [fd, conn] : resource.connections) {
    resource.finish(conn, end);
    ::close(fd);
  }
  ::close(listener);
  ::unlink(options.socket_path.c_str());
  return 0;
}

}  // namespace warden::torture
