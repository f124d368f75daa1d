// support/unwaited_release.h — the checks shared by the engines whose unlock() sends the
// release without waiting for the server's answer (Engine::release_async): it returns
// while the server is frozen, the server still gets it, and a release the server never
// confirmed is retried until it is.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "support/waiting.h"
#include "warden/client.h"
#include "warden/lock.h"

namespace warden::testing {

// The server is frozen by `freeze` (SIGSTOP: the kernel still accepts bytes, nobody
// answers) and thawed by `thaw`.
struct FreezableServer {
  std::string uri;
  std::function<void()> freeze;
  std::function<void()> thaw;
};

// With an op_timeout far beyond kPrompt, unlock() returns promptly although nobody
// answers; once thawed, the server has the release: another client gets the lock long
// before its lease (one minute) could have run out.
inline void expect_unlock_returns_while_the_server_is_frozen(const FreezableServer& server) {
  Client holder = Client::open(server.uri, quick_options(30'000ms));
  Client next = Client::open(server.uri, quick_options());
  LockOptions long_lease;
  long_lease.ttl = 60'000ms;
  Lock lock = holder.lock("g", "unwaited", long_lease);
  lock.lock();
  server.freeze();
  const auto took = Clock::now();
  lock.unlock();
  EXPECT_LT(Clock::now() - took, kPrompt) << "unlock() waited for a frozen server";
  server.thaw();
  EXPECT_TRUE(eventually([&] {
    return static_cast<bool>(next.lock("g", "unwaited").acquire(Mode::exclusive, Wait::none()));
  })) << "the release sent without waiting never took effect";
}

// With a short op_timeout the unanswered release fails while the server is frozen; the
// client counts it and retries in the background until the thawed server confirms it,
// long before the lease (one minute) runs out.
inline void expect_an_unconfirmed_release_is_retried(const FreezableServer& server) {
  Client holder = Client::open(server.uri, quick_options(300ms));
  Client next = Client::open(server.uri, quick_options());
  LockOptions long_lease;
  long_lease.ttl = 60'000ms;
  {
    Lease lease = holder.lock("g", "retried", long_lease).acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    server.freeze();
  }  // dropped: sent, unanswered
  EXPECT_TRUE(eventually([&] {
    return holder.metrics_text().find("warden_release_failures_total{group=\"g\"} 1") !=
           std::string::npos;
  })) << "the unanswered release was not counted as unconfirmed:\n"
      << holder.metrics_text();
  server.thaw();
  // The first send failed, so a confirmed release is the background retry's.
  EXPECT_TRUE(eventually([&] {
    return holder.metrics_text().find("warden_releases_total{group=\"g\"} 1") !=
           std::string::npos;
  })) << "the unconfirmed release was not retried:\n"
      << holder.metrics_text();
  EXPECT_TRUE(eventually([&] {
    return static_cast<bool>(next.lock("g", "retried").acquire(Mode::exclusive, Wait::none()));
  })) << "the lock stayed held after the release was confirmed";
}

}  // namespace warden::testing
