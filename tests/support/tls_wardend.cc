#include "support/tls_wardend.h"

#include <chrono>
#include <regex>
#include <stdexcept>

#include "support/test_certs.h"

namespace warden::testing {

std::vector<std::string> wardend_tls_args(bool mutual, std::vector<std::string> more) {
  const TestCerts& certs = TestCerts::shared();
  std::vector<std::string> args = {"--tls-listen", "127.0.0.1:0",
                                   "--tls-cert",   certs.server().cert.string(),
                                   "--tls-key",    certs.server().key.string()};
  if (mutual) {
    args.push_back("--tls-ca");
    args.push_back(certs.ca().cert.string());
  }
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::uint16_t wardend_tls_port(ServerProcess& process) {
  if (!process.wait_for_log("TLS listening on", std::chrono::seconds(10))) {
    throw std::runtime_error("no TLS listener; log:\n" + process.log_text());
  }
  std::smatch m;
  const std::string log = process.log_text();
  if (!std::regex_search(log, m, std::regex("TLS listening on [^ ]*:([0-9]+) \\(mTLS: "))) {
    throw std::runtime_error("no TLS port in the log:\n" + log);
  }
  return static_cast<std::uint16_t>(std::stoi(m[1]));
}

TlsWardend::TlsWardend(bool mutual, std::vector<std::string> more)
    : server(wardend_tls_args(mutual, std::move(more))),
      tls_port(wardend_tls_port(server.process())) {}

std::string TlsWardend::uri(bool client_cert, const std::string& extra) const {
  const TestCerts& certs = TestCerts::shared();
  std::string uri =
      "wardens://127.0.0.1:" + std::to_string(tls_port) + "?ca=" + certs.ca().cert.string();
  if (client_cert) {
    uri += "&cert=" + certs.client().cert.string() + "&key=" + certs.client().key.string();
  }
  return uri + extra;
}

}  // namespace warden::testing
