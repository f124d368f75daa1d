// warden://: renewals, releases and checks share one pipelined control connection;
// every caller still gets its own answer, in order.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "compose/engine_registry.h"
#include "core/engine.h"
#include "core/uri.h"
#include "support/server_process.h"
#include "support/waiting.h"
#include "support/wardend_probe.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(WardenControl, RenewBatchAnswersEachGrantInOrder) {
  Wardend server;
  const WardendProbe probe(server.port());
  const std::unique_ptr<core::Engine> engine =
      compose::open_engine(core::Uri::parse(server.uri()), ClientOptions{});

  constexpr int kGrants = 50;
  std::vector<core::GrantRef> grants;
  for (int i = 0; i < kGrants; ++i) {
    core::AcquireRequest request;
    request.key = core::LockKey{"g", "n" + std::to_string(i)};
    request.options.ttl = 2000ms;
    request.deadline = Clock::time_point::min();
    const auto granted = engine->acquire(request);
    ASSERT_TRUE(granted);
    grants.push_back(granted->grant);
  }
  // Every third grant disappears behind the engine's back.
  for (int i = 0; i < kGrants; i += 3) {
    ASSERT_TRUE(probe.release("g/n" + std::to_string(i), grants[i].token, grants[i].owner));
  }

  const auto before = Clock::now();
  const std::vector<core::Renewed> renewed = engine->renew(grants);
  const auto after = Clock::now();
  ASSERT_EQ(renewed.size(), grants.size());
  for (int i = 0; i < kGrants; ++i) {
    if (i % 3 == 0) {
      EXPECT_FALSE(renewed[i].expires) << "grant " << i << " is gone but was renewed";
    } else {
      ASSERT_TRUE(renewed[i].expires) << "grant " << i << " is held but was not renewed";
      // From the send time of the round: after `before`, and never past after + ttl.
      EXPECT_GE(*renewed[i].expires, before + grants[i].ttl);
      EXPECT_LE(*renewed[i].expires, after + grants[i].ttl);
    }
  }
  for (const auto& grant : grants) engine->release(grant);
}

TEST(WardenControl, ConcurrentReleasesAreAllConfirmedOnOneConnection) {
  Wardend server;
  const WardendProbe probe(server.port());
  Client client = Client::open(server.uri());
  constexpr int kThreads = 24;
  std::vector<Lease> leases;
  for (int i = 0; i < kThreads; ++i) {
    leases.push_back(
        client.lock("g", "n" + std::to_string(i)).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(leases.back());
  }
  const auto connections = probe.info("connections");
  {
    std::vector<std::jthread> threads;
    for (auto& lease : leases) {
      threads.emplace_back([&lease] {
        lease.release();  // throws (and fails the test) if not confirmed
      });
    }
  }
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_TRUE(probe.inspect("g/n" + std::to_string(i)).holder_tokens.empty()) << i;
    EXPECT_FALSE(leases[i].valid());
  }
  EXPECT_LE(probe.info("connections"), connections) << "releases opened connections";
}

}  // namespace
}  // namespace warden::testing
