#include "torture/partition_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

namespace warden::torture {
namespace {

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// Sends all of `data`; false if the peer is gone.
bool send_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::uint16_t default_port(const std::string& scheme) {
  if (scheme == "redis" || scheme == "redlock") return 6379;
  if (scheme == "etcd") return 2379;
  if (scheme == "zk") return 2181;
  if (scheme == "warden" || scheme == "wardens") return 7380;
  if (scheme == "postgres" || scheme == "postgresql") return 5432;
  if (scheme == "mysql") return 3306;
  throw std::runtime_error("partition-client cannot route " + scheme + ":// URLs");
}

}  // namespace

PartitionProxy::PartitionProxy(std::string target_host, std::uint16_t target_port)
    : target_host_(std::move(target_host)), target_port_(target_port) {
  if (target_host_ != "127.0.0.1" && target_host_ != "localhost") {
    throw std::runtime_error("partition-client relays to loopback backends only, not " +
                             target_host_);
  }
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof(addr);
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("partition proxy: cannot listen: " + why);
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

PartitionProxy::~PartitionProxy() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  ::close(listener_);
}

void PartitionProxy::silence_connections() {
  silence_ = true;
  // The relay thread clears the flag once it has stopped relaying those connections.
  while (silence_.load() && thread_.joinable()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void PartitionProxy::run(const std::stop_token& stop) {
  std::map<int, int> peer;  // each relayed socket -> the other end of its pair
  // Accepted, not yet connected upstream: once healed and due (delay_new_connections).
  struct Waiting {
    int client;
    std::chrono::steady_clock::time_point due;
  };
  std::vector<Waiting> waiting;
  std::vector<int> silenced;  // silence_connections(): open, never relayed again
  const auto drop = [&peer](int fd) {
    const auto it = peer.find(fd);
    if (it == peer.end()) return;
    const int other = it->second;
    ::close(fd);
    ::close(other);
    peer.erase(fd);
    peer.erase(other);
  };
  const auto connect_upstream = [&](int client) {
    const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in addr = loopback(target_port_);
    if (server < 0 ||
        ::connect(server, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (server >= 0) ::close(server);
      ::close(client);  // the backend is down: so is this connection
      return;
    }
    peer[client] = server;
    peer[server] = client;
  };

  std::vector<pollfd> fds;
  char buffer[65536];
  while (!stop.stop_requested()) {
    if (drop_.exchange(false)) {
      while (!peer.empty()) drop(peer.begin()->first);
    }
    if (silence_.load()) {
      for (const auto& [fd, other] : peer) silenced.push_back(fd);
      peer.clear();  // never read or written again; closed when the proxy ends
      silence_ = false;
    }
    const bool cut = cut_;
    if (!cut) {
      const auto now = std::chrono::steady_clock::now();
      std::erase_if(waiting, [&](const Waiting& w) {
        if (w.due > now) return false;
        connect_upstream(w.client);
        return true;
      });
    }
    fds.assign(1, pollfd{listener_, POLLIN, 0});
    if (!cut) {
      for (const auto& [fd, other] : peer) fds.push_back(pollfd{fd, POLLIN, 0});
    }
    // A short timeout, so that a cut takes effect within milliseconds.
    if (::poll(fds.data(), fds.size(), 5) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        const auto delay = std::chrono::milliseconds(delay_ms_.load());
        if (cut || delay.count() > 0) {
          waiting.push_back({client, std::chrono::steady_clock::now() + delay});
        } else {
          connect_upstream(client);
        }
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0 || peer.count(fds[i].fd) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n <= 0 || !send_all(peer[fds[i].fd], buffer, static_cast<std::size_t>(n))) {
        drop(fds[i].fd);
      }
    }
  }
  for (const Waiting& w : waiting) ::close(w.client);
  for (int fd : silenced) ::close(fd);
  while (!peer.empty()) drop(peer.begin()->first);
}

std::string proxied_url(const std::string& url,
                        std::vector<std::unique_ptr<PartitionProxy>>& proxies) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) throw std::runtime_error("not a URL: " + url);
  const std::string scheme = url.substr(0, scheme_end);
  const std::size_t start = scheme_end + 3;
  const std::size_t end = std::min(url.find('/', start), url.find('?', start));
  std::string authority =
      url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  const auto at = authority.rfind('@');
  const std::string userinfo = at == std::string::npos ? "" : authority.substr(0, at + 1);
  if (at != std::string::npos) authority.erase(0, at + 1);

  std::string hosts;
  std::size_t from = 0;
  while (from <= authority.size()) {
    const auto comma = authority.find(',', from);
    const std::string host_port =
        authority.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (host_port.find('[') != std::string::npos) {
      throw std::runtime_error("partition-client does not relay IPv6 hosts");
    }
    const auto colon = host_port.rfind(':');
    const std::string host = host_port.substr(0, colon);
    const std::uint16_t port =
        colon == std::string::npos
            ? default_port(scheme)
            : static_cast<std::uint16_t>(std::stoi(host_port.substr(colon + 1)));
    proxies.push_back(std::make_unique<PartitionProxy>(host, port));
    hosts += (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") +
             std::to_string(proxies.back()->port());
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return scheme + "://" + userinfo + hosts + (end == std::string::npos ? "" : url.substr(end));
}

}  // namespace warden::torture
