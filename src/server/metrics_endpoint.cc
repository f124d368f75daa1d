#include "server/metrics_endpoint.h"

#include <httplib.h>

#include "warden/error.h"

namespace warden::server {
namespace {

void sample(std::string& out, const char* name, const char* type, const char* help,
            std::uint64_t value) {
  out += std::string("# HELP ") + name + " " + help + "\n";
  out += std::string("# TYPE ") + name + " " + type + "\n";
  out += std::string(name) + " " + std::to_string(value) + "\n";
}

}  // namespace

std::string render_metrics(const DispatcherStats& s) {
  std::string out;
  sample(out, "wardend_connections", "gauge", "Open client connections.", s.connections);
  sample(out, "wardend_keys", "gauge", "Locks with holders, waiters or a lock-delay.",
         s.table.keys);
  sample(out, "wardend_held_grants", "gauge", "Grants currently held.", s.table.holders);
  sample(out, "wardend_waiters", "gauge", "Requests waiting in lock queues.", s.table.waiters);
  sample(out, "wardend_commands_total", "counter", "Commands executed.", s.commands);
  sample(out, "wardend_grants_total", "counter", "Grants handed out.", s.grants);
  sample(out, "wardend_wait_timeouts_total", "counter", "Waits that ran out.", s.timeouts);
  sample(out, "wardend_lease_expirations_total", "counter",
         "Leases that expired instead of being released.", s.expirations);
  sample(out, "wardend_errors_total", "counter", "Commands answered with an error.", s.errors);
  return out;
}

MetricsEndpoint::MetricsEndpoint(const std::string& host, std::uint16_t port,
                                 std::function<std::string()> render)
    : http_(std::make_unique<httplib::Server>()) {
  http_->Get("/metrics", [render](const httplib::Request&, httplib::Response& res) {
    res.set_content(render(), "text/plain; version=0.0.4");
  });
  const int bound = port == 0 ? http_->bind_to_any_port(host) : (http_->bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    throw Error(Errc::unavailable,
                "cannot serve metrics on " + host + ":" + std::to_string(port));
  }
  port_ = static_cast<std::uint16_t>(bound);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
}

MetricsEndpoint::~MetricsEndpoint() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace warden::server
