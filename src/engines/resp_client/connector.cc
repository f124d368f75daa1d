#include "engines/resp_client/connector.h"

#include <chrono>

namespace warden::engines::resp_client {

Connector::Connector(ConnectOptions options, const RetryPolicy& retry)
    : options_(std::move(options)),
      endpoint_(endpoint_name(options_.host, options_.port)),
      backoff_(retry) {}

std::unique_ptr<Connection> Connector::connect() {
  {
    std::lock_guard guard(mu_);
    const auto now = Clock::now();
    if (now < not_before_) {
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(not_before_ - now);
      throw Error(last_code_,
                  last_message_ + " (next attempt in " + std::to_string(wait.count()) + " ms)");
    }
  }
  try {
    auto conn = Connection::open(options_);
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
