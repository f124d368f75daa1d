// server/metrics_endpoint.h — Prometheus text over HTTP (GET /metrics), served by
// cpp-httplib on a thread of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "server/dispatcher.h"

namespace httplib {
class Server;
}

namespace warden::server {

// The server's gauges and counters in the Prometheus text exposition format.
std::string render_metrics(const DispatcherStats& stats);

class MetricsEndpoint {
 public:
  // Binds host:port (port 0: a free one) and serves `render()` at /metrics. Throws
  // warden::Error(unavailable) if it cannot bind.
  MetricsEndpoint(const std::string& host, std::uint16_t port, std::function<std::string()> render);
  ~MetricsEndpoint();
  std::uint16_t port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> http_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace warden::server
