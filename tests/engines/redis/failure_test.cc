// redis:// when the server refuses us, is not there, or goes away mid-acquire: every
// call ends with the right Error (or no lease) within op_timeout, never a hang, and
// the client works again once the server is back; a holder whose renewals cannot get
// through learns it lost the lease before Redis could hand the lock on.
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <string>
#include <thread>

#include "support/server_process.h"
#include "support/unwaited_release.h"
#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(RedisFailure, WrongOrMissingPasswordFailsOpenWithPermissionDenied) {
  RedisOptions secured;
  secured.password = "s3cret";
  RedisServer server(secured);
  const std::string at = "127.0.0.1:" + std::to_string(server.port());
  fails_with(Errc::permission_denied,
             [&] { (void)Client::open("redis://:wrong@" + at, quick_options()); });
  fails_with(Errc::permission_denied,
             [&] { (void)Client::open(server.bare_uri(), quick_options()); });

  Client client = Client::open(server.uri(), quick_options());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  lease.release();
}

TEST(RedisFailure, UnreachableServerFailsOpenWithUnavailableAtOnce) {
  // A refused connection is an answer: open fails with it instead of waiting out its
  // op_timeout (30 s here, far beyond any slowness of the machine).
  const std::string uri = "redis://127.0.0.1:" + std::to_string(free_port());
  const auto options = quick_options(30'000ms);
  const auto took = fails_with(Errc::unavailable, [&] { (void)Client::open(uri, options); });
  EXPECT_LT(took, options.op_timeout) << "open waited out its op_timeout on a refused port";
}

TEST(RedisFailure, BadUriFailsOpenWithInvalidArgumentBeforeConnecting) {
  // Port 1 refuses connections (unavailable): invalid_argument shows the URI was
  // refused before any connection was tried.
  for (const std::string bad : {
           "redis://",                                // no host
           "redis://127.0.0.1:notaport",              //
           "redis://127.0.0.1:70000",                 // port out of range
           "redis://127.0.0.1:1/db3",                 // db is a number
           "redis://127.0.0.1:1?pool=zero",           //
           "redis://127.0.0.1:1?waiter_ttl_ms=soon",  //
           "redis://127.0.0.1:1?waiter_ttl_ms=-5",    //
       }) {
    try {
      (void)Client::open(bad, quick_options());
      ADD_FAILURE() << "opened " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad << ": " << e.what();
    }
  }
}

TEST(RedisFailure, FrozenServerFailsOpenAfterItsOpTimeout) {
  RedisServer server;
  server.pause();  // the kernel still accepts; nobody answers
  auto opening = std::async(std::launch::async, [&] {
    try {
      (void)Client::open(server.uri(), quick_options(300ms));
      ADD_FAILURE() << "opened a frozen server";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == Errc::deadline_exceeded || e.code() == Errc::unavailable)
          << to_string(e.code()) << ": " << e.what();
    }
  });
  // It gives up by itself (op_timeout 300 ms), rather than wait for the server.
  EXPECT_EQ(opening.wait_for(kNoHang), std::future_status::ready) << "open hung on a frozen server";
  server.resume();
  opening.get();
}

TEST(RedisFailure, AnUnlockReturnsWhileTheServerIsFrozen) {
  RedisServer server;
  expect_unlock_returns_while_the_server_is_frozen(
      {server.uri(), [&] { server.pause(); }, [&] { server.resume(); }});
}

TEST(RedisFailure, AnUnconfirmedReleaseIsRetriedUntilTheServerConfirmsIt) {
  RedisServer server;
  expect_an_unconfirmed_release_is_retried(
      {server.uri(), [&] { server.pause(); }, [&] { server.resume(); }});
}

TEST(RedisFailure, HolderOfAFrozenServerIsToldOfTheLossWithinTheTtl) {
  RedisServer server;
  ClientOptions options = quick_options(200ms);
  options.lock_defaults.ttl = 1s;
  options.renew_interval = 200ms;
  Client holder = Client::open(server.uri(), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const std::uint64_t first_token = held.token();
  std::this_thread::sleep_for(500ms);  // a couple of renewals got through

  // Frozen, Redis cannot renew, and its clock runs on: the lease ends there one TTL
  // after the last renewal, which was sent before the freeze. The client must say so
  // by then on its own clock, while Redis is still silent.
  server.pause();
  const auto frozen = Clock::now();
  ASSERT_TRUE(eventually([&] { return held.lost_token().stop_requested(); },
                         options.lock_defaults.ttl + kPrompt))
      << "the renewals failed but the lease was never reported lost";
  EXPECT_LE(Clock::now() - frozen, options.lock_defaults.ttl + 100ms)
      << "the loss was reported after Redis could have granted the lock to another";
  server.resume();

  // Redis agrees: the lease ran out there too, and the next grant has a larger token.
  Client other = Client::open(server.uri(), options);
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(2s));
  ASSERT_TRUE(next) << "the frozen holder's lease was still held in Redis";
  EXPECT_GT(next.token(), first_token);
  EXPECT_NO_THROW(held.release());
}

TEST(RedisFailure, ServerGoneMidAcquireEndsTheWaitAndTheClientRecovers) {
  RedisServer server;
  RedisProbe probe(server);
  ClientOptions options = quick_options(1000ms);
  options.renew_interval = 300ms;  // the holder learns of the restart at its next renewal
  Client holder = Client::open(server.uri(), options);
  Client waiter = Client::open(server.uri(), options);
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = acquire_queued(waiter, probe, "x", Mode::exclusive, Wait::forever());
  ASSERT_EQ(queued(probe, "g", "x"), 1);

  server.kill9();
  ASSERT_EQ(waiting.wait_for(kNoHang), std::future_status::ready)
      << "a waiting acquire (Wait::forever) hung after its server died";
  try {
    EXPECT_FALSE(waiting.get()) << "granted by a server that is gone";
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == Errc::unavailable || e.code() == Errc::deadline_exceeded)
        << to_string(e.code()) << ": " << e.what();
  }

  // Back without its data: the same clients work again.
  server.start();
  // Well within its TTL (30 s): the renewal, not the lease's end, tells the loss.
  EXPECT_TRUE(eventually([&] { return held.lost(); }, options.lock_defaults.ttl / 2))
      << "the holder's grant is gone with the data, but its lease is not lost";
  EXPECT_NO_THROW(held.release());
  Lease lease;
  ASSERT_TRUE(eventually(
      [&] {
        try {
          lease = waiter.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(500ms));
        } catch (const Error&) {
          // the client may need a call or two to notice its connections are new
        }
        return lease.valid();
      },
      5s))
      << "no grant after the server came back";
  EXPECT_TRUE(waiter.check(lease.sequencer()));
  lease.release();
  EXPECT_TRUE(holder.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing
