// zk:// and the ZooKeeper session, which is the lease: a standalone server frozen with
// SIGSTOP for longer than the session timeout expires the holders' sessions when it runs
// again. Before that, while it is still frozen, each holder must have been told that its
// lease is lost — at the disconnect with on_suspend=lose, at the session timeout after
// the last renewal with on_suspend=wait — since the server may hand the lock on as soon
// as it runs. Afterwards the lock goes to another client with a larger token, and the
// first Clients carry on with new sessions, even when asked at once. A session that lives, on the other hand,
// keeps its leases for as long as the watchdog renews them, however the TTL compares
// with the session timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/fence_gate.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(ZkSession, ServerFrozenPastTheSessionTimeoutLosesTheLeasesBeforeTheLockCanMove) {
  ZooKeeperEnsemble zk;
  // 1 s sessions (the C client gives a silent server up after 2/3 of that), renewed
  // every 200 ms; the TTL is longer than the session, so the session is what counts.
  const ClientOptions options = with_ttl(3s, 1000ms, 200ms);
  Client lose = Client::open(uri_with(zk, "session_timeout_ms=1000"), options);
  Client wait = Client::open(uri_with(zk, "session_timeout_ms=1000&on_suspend=wait"), options);
  FenceGate gate;

  Lease x = lose.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(x);
  Lease y = wait.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(y);
  ASSERT_TRUE(gate.admit(x.sequencer()));
  ASSERT_TRUE(gate.admit(y.sequencer()));
  std::atomic<Clock::rep> x_lost_at{0}, y_lost_at{0};
  x.on_lost([&] { x_lost_at = stamp_now(); });
  y.on_lost([&] { y_lost_at = stamp_now(); });
  std::this_thread::sleep_for(1200ms);  // longer than a session: the renewals work
  ASSERT_FALSE(x.lost()) << "x was lost while the server ran";
  ASSERT_FALSE(y.lost()) << "y was lost while the server ran";

  zk.pause(0);
  const auto paused = Clock::now();
  const bool lost_in_time = eventually([&] { return x.lost() && y.lost(); }, 2500ms);
  std::this_thread::sleep_until(paused + 3s);
  const auto resumed = Clock::now();
  zk.resume(0);
  // At once, before the clients have heard that their sessions expired: a new request
  // belongs on a new session; it must not fail because the old one is gone.
  for (Client* client : {&lose, &wait}) {
    const char* which = client == &lose ? "on_suspend=lose" : "on_suspend=wait";
    try {
      Lease z = client->lock("g", "z").acquire(Mode::exclusive, Wait::up_to(5s));
      EXPECT_TRUE(z) << which << ": no grant of a free lock right after the server came back";
    } catch (const Error& e) {
      ADD_FAILURE() << which << ": acquire right after the server came back threw "
                    << to_string(e.code()) << ": " << e.what();
    }
  }
  ASSERT_TRUE(lost_in_time) << "frozen for " << seconds(resumed - paused)
                            << " s, but x lost: " << x.lost() << ", y lost: " << y.lost();
  ASSERT_TRUE(eventually([&] { return x_lost_at.load() != 0 && y_lost_at.load() != 0; }, kPrompt))
      << "on_lost did not run";
  // The server could expire a session one session timeout after the last request it
  // answered, sent before the pause; 100 ms for the reaper's wake-up.
  EXPECT_LE(at(x_lost_at) - paused, 1100ms) << "on_suspend=lose noticed the loss late";
  EXPECT_LE(at(y_lost_at) - paused, 1100ms) << "on_suspend=wait noticed the loss late";
  EXPECT_LT(at(x_lost_at), resumed);
  EXPECT_LT(at(y_lost_at), resumed);

  // The server runs again and expires both sessions — unless it takes a client's
  // reconnect first, which revives that session: either way the locks move on.
  Client other = Client::open(zk.uri(), options);
  Lease x2 = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s));
  ASSERT_TRUE(x2) << "x stays taken:" << describe(lock_children(zk, "g", "x"));
  Lease y2 = other.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(10s));
  ASSERT_TRUE(y2) << "y stays taken:" << describe(lock_children(zk, "g", "y"));
  EXPECT_GT(x2.token(), x.token());
  EXPECT_GT(y2.token(), y.token());
  EXPECT_TRUE(gate.admit(x2.sequencer()));
  EXPECT_TRUE(gate.admit(y2.sequencer()));
  EXPECT_FALSE(lose.check(x.sequencer()));
  EXPECT_FALSE(wait.check(y.sequencer()));
  EXPECT_NO_THROW(x.release());
  EXPECT_NO_THROW(y.release());

  // The first Clients work on (on new sessions, or the revived ones): queued behind
  // `other`, then granted.
  auto x_again = std::async(std::launch::async, [&] {
    return lose.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(10s));
  });
  auto y_again = std::async(std::launch::async, [&] {
    return wait.lock("g", "y").acquire(Mode::exclusive, Wait::up_to(10s));
  });
  ASSERT_TRUE(eventually([&] { return requests(zk, "g", "x") == 2 && requests(zk, "g", "y") == 2; }))
      << "the first Clients did not queue:" << describe(warden_tree(zk));
  const std::uint64_t x2_token = x2.token();
  const std::uint64_t y2_token = y2.token();
  x2.release();
  y2.release();
  Lease x3;
  Lease y3;
  try {
    x3 = x_again.get();
    y3 = y_again.get();
  } catch (const Error& e) {
    FAIL() << "acquire after the session expired threw " << to_string(e.code()) << ": "
           << e.what();
  }
  ASSERT_TRUE(x3);
  ASSERT_TRUE(y3);
  EXPECT_GT(x3.token(), x2_token);
  EXPECT_GT(y3.token(), y2_token);
  EXPECT_TRUE(gate.admit(x3.sequencer()));
  EXPECT_TRUE(gate.admit(y3.sequencer()));
  std::this_thread::sleep_for(1200ms);  // past a session timeout of the new sessions
  EXPECT_FALSE(x3.lost());
  EXPECT_FALSE(y3.lost());
  EXPECT_TRUE(lose.check(x3.sequencer()));
  EXPECT_TRUE(wait.check(y3.sequencer()));
  x3.release();
  y3.release();
  EXPECT_TRUE(no_requests(zk, "g", "x")) << describe(lock_children(zk, "g", "x"));
  EXPECT_TRUE(no_requests(zk, "g", "y")) << describe(lock_children(zk, "g", "y"));
}

TEST(ZkSession, LeaseWithTheDefaultClientOptionsOutlivesAShorterSessionTimeout) {
  ZooKeeperEnsemble zk;
  // Default ClientOptions: a 30 s TTL, which the watchdog would renew every TTL/3 = 10 s.
  // A 1.5 s session, shorter than the TTL as the default one is (10 s asked for; granted
  // as such by a server with ZooKeeper's default 2 s tick, clamped to 4 s here). The
  // session lives, so the lease must too.
  const std::string uri = uri_with(zk, "session_timeout_ms=1500");
  Client client = Client::open(uri);
  Client other = Client::open(uri);
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  std::atomic<Clock::rep> lost_at{0};
  const auto granted = Clock::now();
  held.on_lost([&] { lost_at = stamp_now(); });

  const auto watch_until = granted + 2500ms;
  while (Clock::now() < watch_until && !held.lost()) std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(held.lost()) << "a lease of a live session was lost "
                            << seconds(at(lost_at) - granted) << " s after it was granted";
  EXPECT_TRUE(client.check(held.sequencer()));
  EXPECT_FALSE(other.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_NO_THROW(held.release());
  // Lost or not, the lock is free once it is released.
  Lease next = other.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(2s));
  EXPECT_TRUE(next) << "the released lock stays taken:" << describe(lock_children(zk, "g", "x"));
  next = Lease();
  EXPECT_TRUE(no_requests(zk, "g", "x")) << describe(lock_children(zk, "g", "x"));
}

}  // namespace
}  // namespace warden::testing
