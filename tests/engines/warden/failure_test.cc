// warden:// when the server is gone, frozen or refuses us: every call ends with the
// right Error within op_timeout, never a hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <future>
#include <stop_token>
#include <string>

#include "support/server_process.h"
#include "support/unwaited_release.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/multi_lock.h"

namespace warden::testing {
namespace {

TEST(WardenFailure, UnreachableServerFailsOpenWithUnavailableAtOnce) {
  const std::string uri = "warden://127.0.0.1:" + std::to_string(free_port());
  const auto took =
      fails_with(Errc::unavailable, [&] { (void)Client::open(uri, quick_options()); });
  EXPECT_LT(took, kPrompt);
}

TEST(WardenFailure, FrozenServerFailsOpenWithinOpTimeout) {
  Wardend server;
  server.process().signal(SIGSTOP);  // the kernel still accepts; nobody answers
  const auto took = fails_with(Errc::deadline_exceeded,
                               [&] { (void)Client::open(server.uri(), quick_options(300ms)); });
  EXPECT_LT(took, 300ms + kPrompt);
  server.process().signal(SIGCONT);
}

TEST(WardenFailure, CallsToAFrozenServerEndWithinOpTimeout) {
  Wardend server;
  Client client = Client::open(server.uri(), quick_options(300ms));
  Lease lease = client.lock("g", "held").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const Sequencer seq = lease.sequencer();
  server.process().signal(SIGSTOP);

  const auto bound = 300ms + kPrompt;
  EXPECT_LT(fails_with(Errc::deadline_exceeded,
                       [&] { (void)client.lock("g", "x").acquire(Mode::exclusive, Wait::none()); }),
            bound);
  EXPECT_LT(fails_with(Errc::deadline_exceeded, [&] { (void)client.check(seq); }), bound);
  EXPECT_LT(fails_with(Errc::deadline_exceeded, [&] { lease.release(); }), bound);
  EXPECT_TRUE(lease.valid()) << "a release the server never confirmed dropped the lease";

  server.process().signal(SIGCONT);
  // Thawed, the same client works again on fresh connections. (The server still reads
  // the RELEASE that timed out, so the lease may or may not be held now: a timeout is
  // an unknown outcome, and release is idempotent.)
  EXPECT_NO_THROW((void)client.check(seq));
  EXPECT_NO_THROW(lease.release());
  EXPECT_FALSE(client.check(seq));
}

TEST(WardenFailure, AnUnlockReturnsWhileTheServerIsFrozen) {
  Wardend server;
  expect_unlock_returns_while_the_server_is_frozen({server.uri(),
                                                    [&] { server.process().signal(SIGSTOP); },
                                                    [&] { server.process().signal(SIGCONT); }});
}

TEST(WardenFailure, AnUnconfirmedReleaseIsRetriedUntilTheServerConfirmsIt) {
  Wardend server;
  expect_an_unconfirmed_release_is_retried({server.uri(),
                                            [&] { server.process().signal(SIGSTOP); },
                                            [&] { server.process().signal(SIGCONT); }});
}

TEST(WardenFailure, ServerGoneFailsCallsWithUnavailableAndParkedWaitsEnd) {
  Wardend server;
  Client holder = Client::open(server.uri(), quick_options());
  Client waiter = Client::open(server.uri(), quick_options());
  LockOptions short_lease;
  short_lease.ttl = 500ms;
  Lease lease = holder.lock("g", "x", short_lease).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  auto parked = std::async(std::launch::async, [&] {
    return waiter.lock("g", "x").acquire(Mode::exclusive, Wait::forever());
  });
  ASSERT_EQ(parked.wait_for(200ms), std::future_status::timeout);

  const auto killed_at = Clock::now();
  server.process().kill9();
  ASSERT_EQ(parked.wait_for(kPrompt), std::future_status::ready)
      << "a parked wait did not notice its server died";
  EXPECT_LT(fails_with(Errc::unavailable, [&] { (void)parked.get(); }), kPrompt);

  EXPECT_LT(fails_with(Errc::unavailable,
                       [&] { (void)waiter.lock("g", "y").acquire(Mode::exclusive, Wait::none()); }),
            kPrompt);
  EXPECT_LT(
      fails_with(Errc::unavailable,
                 [&] { (void)waiter.lock("g", "y").acquire(Mode::exclusive, Wait::forever()); }),
      kPrompt);
  EXPECT_LT(fails_with(Errc::unavailable, [&] { (void)waiter.check(lease.sequencer()); }), kPrompt);

  // The holder cannot renew: its lease is lost by its TTL on the client's clock.
  ASSERT_TRUE(eventually([&] { return lease.lost(); }, 2s));
  EXPECT_LT(Clock::now() - killed_at, short_lease.ttl + kPrompt);
  EXPECT_NO_THROW(lease.release());  // a lost lease: no I/O
}

TEST(WardenFailure, ServerGoneEndsAParkedMultiLockWithUnavailable) {
  Wardend server;
  Client holder = Client::open(server.uri(), quick_options());
  Client waiter = Client::open(server.uri(), quick_options());
  Lease lease = holder.lock("g", "b").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  MultiLock pair = waiter.multi({{"g", "a"}, {"g", "b"}});
  auto parked = std::async(std::launch::async, [&] { return pair.acquire(Wait::forever()); });
  ASSERT_EQ(parked.wait_for(200ms), std::future_status::timeout);

  server.process().kill9();
  ASSERT_EQ(parked.wait_for(kPrompt), std::future_status::ready)
      << "a parked multi-lock did not notice its server died";
  EXPECT_LT(fails_with(Errc::unavailable, [&] { (void)parked.get(); }), kPrompt);
}

TEST(WardenFailure, WrongOrMissingPasswordIsPermissionDenied) {
  Wardend server({"--requirepass", "s3cret"});
  const std::string port = std::to_string(server.port());
  fails_with(Errc::permission_denied,
             [&] { (void)Client::open("warden://:wrong@127.0.0.1:" + port, quick_options()); });
  fails_with(Errc::permission_denied,
             [&] { (void)Client::open("warden://127.0.0.1:" + port, quick_options()); });

  Client client = Client::open("warden://:s3cret@127.0.0.1:" + port, quick_options());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(1s));
  ASSERT_TRUE(lease);
  EXPECT_TRUE(client.check(lease.sequencer()));
  lease.release();
}

}  // namespace
}  // namespace warden::testing
