#include "engines/resp_client/connector.h"

#include <algorithm>
#include <chrono>

#include "engines/resp_client/master_locator.h"

namespace warden::engines::resp_client {

std::unique_ptr<Connection> open_connection(const ConnectOptions& options,
                                            const std::shared_ptr<const TlsContext>& tls) {
  if (options.locator) return options.locator->connect(options, tls);
  return Connection::open(options, tls);
}

bool still_current(const Connection& conn, const ConnectOptions& options) {
  return !options.locator || options.locator->is_current(conn.endpoint());
}

Connector::Connector(ConnectOptions options, const RetryPolicy& retry,
                     std::shared_ptr<const TlsContext> tls)
    : options_(std::move(options)),
      endpoint_(options_.locator ? options_.locator->description()
                                 : endpoint_name(options_.host, options_.port)),
      tls_(!options_.tls.enabled ? nullptr
           : tls                 ? std::move(tls)
                                 : TlsContext::create(options_.tls, endpoint_)),
      backoff_(retry),
      suspect_backoff_(retry) {}

void Connector::throw_if_backing_off() {
  std::lock_guard guard(mu_);
  const auto now = Clock::now();
  const auto until = std::max(not_before_, suspect_until_);
  if (now < until) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - now);
    throw Error(last_code_,
                last_message_ + " (next attempt in " + std::to_string(wait.count()) + " ms)");
  }
}

void Connector::suspect(const Error& why) {
  std::lock_guard guard(mu_);
  suspect_until_ = Clock::now() + suspect_backoff_.next_delay();
  last_code_ = why.code();
  const std::string what = why.what();
  const auto colon = what.find(": ");
  last_message_ = colon == std::string::npos ? what : what.substr(colon + 2);
}

void Connector::answered() {
  std::lock_guard guard(mu_);
  if (suspect_until_ == Clock::time_point{}) return;
  suspect_backoff_.reset();
  suspect_until_ = {};
}

void Connector::server_moved(const Connection& conn) {
  if (options_.locator) options_.locator->forget(conn.endpoint());
}

std::unique_ptr<Connection> Connector::connect() {
  throw_if_backing_off();
  try {
    auto conn = open_connection(options_, tls_);
    std::lock_guard guard(mu_);
    backoff_.reset();
    not_before_ = {};
    return conn;
  } catch (const Error& e) {
    std::lock_guard guard(mu_);
    not_before_ = Clock::now() + backoff_.next_delay();
    last_code_ = e.code();
    // Error::what() already starts with the code's name; keep the rest.
    const std::string what = e.what();
    const auto colon = what.find(": ");
    last_message_ = colon == std::string::npos ? what : what.substr(colon + 2);
    throw;
  }
}

}  // namespace warden::engines::resp_client
