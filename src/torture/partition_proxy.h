// torture/partition_proxy.h — the network between one torture client and one backend
// endpoint, made cuttable without root: a TCP relay on 127.0.0.1 that the client
// connects to instead of the backend. The nemesis `partition-client` cuts a client's
// relays: while cut they forward nothing either way and connect nothing new, so the
// client's requests and the backend's replies stall in the socket buffers as they
// would in a partition (the client's own timeouts fire); healing lets everything
// through again, late, as TCP would after a short partition.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace warden::torture {

class PartitionProxy {
 public:
  // Listens on a free 127.0.0.1 port and relays to target_host:target_port. Throws
  // std::runtime_error if it cannot listen.
  PartitionProxy(std::string target_host, std::uint16_t target_port);
  ~PartitionProxy();
  PartitionProxy(const PartitionProxy&) = delete;
  PartitionProxy& operator=(const PartitionProxy&) = delete;

  std::uint16_t port() const { return port_; }
  void cut() { cut_ = true; }
  void heal() { cut_ = false; }
  // Closes every relayed connection, both ends (each side sees the other close it, as
  // when a NAT or a restarted middlebox drops its state); new connections are relayed
  // as before (or held while cut). Takes effect within milliseconds.
  void drop_connections() { drop_ = true; }
  // Makes every relayed connection silent for good, both ways, without closing it (no
  // FIN, no RST: as when a NAT or firewall forgets a connection and drops its packets);
  // new connections are relayed as before. Returns once in effect: nothing more passes.
  void silence_connections();
  // Every connection accepted from now on is relayed only `delay` after it was accepted
  // (a backend slow to answer new connections: a loaded machine, a slow handshake);
  // zero, the default, relays at once.
  void delay_new_connections(std::chrono::milliseconds delay) { delay_ms_ = delay.count(); }

 private:
  void run(const std::stop_token& stop);

  const std::string target_host_;
  const std::uint16_t target_port_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<bool> drop_{false};
  std::atomic<bool> silence_{false};
  std::atomic<std::int64_t> delay_ms_{0};
  std::jthread thread_;
};

// `url` with every host:port of its authority replaced by 127.0.0.1:PORT of a new proxy
// to it (appended to `proxies`). Throws std::runtime_error for a URL it cannot rewrite
// (an IPv6 host).
std::string proxied_url(const std::string& url,
                        std::vector<std::unique_ptr<PartitionProxy>>& proxies);

}  // namespace warden::torture
