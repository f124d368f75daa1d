// tls/tls_checks.h — what every TLS client test asks: does a Client on this URI take a
// lock, or which Error stops it (without hanging the test); and what does the real
// `warden run` binary exit with on it.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cli/process.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/options.h"

namespace warden::testing {

// Tells a hang from an answer, never a fast answer from a slow one: far above the
// 5 s op_timeout that bounds every connect, even under a sanitizer on a loaded machine.
inline constexpr std::chrono::seconds kNoHang{60};

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Opens a Client on `uri` and takes one lock, on another thread so a hang fails the
// test instead of stalling it. The Error that stopped it, or nullopt if it locked.
inline std::optional<Error> lock_error(const std::string& uri, ClientOptions options = {}) {
  using Result = std::optional<Error>;
  auto task = std::make_shared<std::packaged_task<Result()>>([uri, options]() -> Result {
    try {
      Client client = Client::open(uri, options);
      Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
      if (!lease) return Error(Errc::internal, "the lock was not granted");
      lease.release();
      return std::nullopt;
    } catch (const Error& e) {
      return e;
    }
  });
  std::future<Result> result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(kNoHang) != std::future_status::ready) {
    return Error(Errc::internal, "HUNG: no answer from " + uri);
  }
  return result.get();
}

#define EXPECT_LOCKS(uri)                                    \
  do {                                                       \
    const auto error_ = lock_error(uri);                     \
    EXPECT_FALSE(error_) << (uri) << ": " << error_->what(); \
  } while (0)

// `warden run --url URL --group g --name n -- true` with the built binary.
inline cli::testing::Outcome warden_run(const std::string& url) {
  return cli::testing::run(
      {WARDEN_CLI_PATH, "run", "--url", url, "--group", "g", "--name", "n", "--", "true"},
      cli::testing::environment({"WARDEN_URL"}), kNoHang);
}

}  // namespace warden::testing
