// warden://: each acquire that waits on the server holds a pooled connection of its
// own; ?pool=N caps them; idle connections are reused.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <stop_token>
#include <thread>
#include <vector>

#include "support/server_process.h"
#include "support/waiting.h"
#include "support/wardend_probe.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(WardenPool, EachWaitingAcquireHoldsAConnectionOfItsOwn) {
  Wardend server;
  const WardendProbe probe(server.port());
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri());
  LockOptions barging;  // non-fair, so the waiters are granted in any order
  barging.fairness = Fairness::non_fair;
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  // Eight threads of one client block at once; each is a waiter of its own on the
  // server, which needs a connection per parked ACQUIRE.
  constexpr int kWaiters = 8;
  std::atomic<int> granted{0};
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kWaiters; ++i) {
      threads.emplace_back([&](std::stop_token stop) {
        Lease lease =
            client.lock("g", "x", barging).acquire(Mode::exclusive, Wait::forever(), stop);
        if (lease) ++granted;
      });
    }
    ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == kWaiters; }))
        << "waiters on the server: " << probe.inspect("g/x").waiters;
    // The holder's, the client's control connection and pool, and the probe's own.
    EXPECT_GE(probe.info("connections"), kWaiters + 2);
    // Each thread releases its lease as it ends, handing the lock to the next.
    held.release();
    ASSERT_TRUE(eventually([&] { return granted.load() == kWaiters; }))
        << "granted: " << granted.load();
  }
  EXPECT_EQ(probe.inspect("g/x").waiters, 0u);
  EXPECT_TRUE(probe.inspect("g/x").holder_tokens.empty());
}

TEST(WardenPool, PoolSizeCapsConnectionsAndExtraAcquirersWaitForOne) {
  Wardend server;
  const WardendProbe probe(server.port());
  Client holder = Client::open(server.uri());
  Client client = Client::open(server.uri() + "?pool=2", quick_options(300ms));
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  std::stop_source stop;
  std::vector<std::future<Lease>> parked;
  for (int i = 0; i < 2; ++i) {
    parked.push_back(std::async(std::launch::async, [&] {
      return client.lock("g", "x").acquire(Mode::exclusive, Wait::forever(), stop.get_token());
    }));
  }
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == 2; }));

  // A third wait finds no free connection: it waits for one and times out as a wait
  // does, without ever reaching the server.
  const auto start = Clock::now();
  EXPECT_FALSE(client.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(300ms)));
  EXPECT_GE(Clock::now() - start, 300ms - 25ms);
  EXPECT_EQ(probe.inspect("g/y").waiters, 0u);
  // A try cannot wait for a connection beyond op_timeout: that is a limit, not "busy".
  try {
    (void)client.lock("g", "y").acquire(Mode::exclusive, Wait::none());
    ADD_FAILURE() << "a try went through with every pooled connection busy";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::resource_exhausted) << e.what();
  }
  // Renewals, releases and checks do not need the pool.
  EXPECT_TRUE(client.check(held.sequencer()));

  stop.request_stop();
  for (auto& f : parked) EXPECT_FALSE(f.get());
  EXPECT_TRUE(client.lock("g", "y").acquire(Mode::exclusive, Wait::none()));
}

TEST(WardenPool, IdleConnectionsAreReused) {
  Wardend server;
  const WardendProbe probe(server.port());
  Client client = Client::open(server.uri());
  const auto before = probe.info("connections");  // the client's control connection + probe
  for (int i = 0; i < 20; ++i) {
    Lease lease = client.lock("g", "n" + std::to_string(i)).acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
  }
  EXPECT_LE(probe.info("connections"), before + 1) << "one pooled connection serves them all";
}

}  // namespace
}  // namespace warden::testing
