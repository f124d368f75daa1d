// Conformance: release, renew-by-owner-only and lock-delay (DESIGN §2 "Release",
// "Lock-delay").
#include <array>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "compose/engine_registry.h"
#include "conformance/conformance_suite.h"
#include "core/engine.h"
#include "core/uri.h"

namespace warden::conformance {
namespace {

TEST_P(Conformance, ReleaseIsIdempotent) {
  Client a = open_client();
  Lease lease = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  lease.release();
  EXPECT_FALSE(lease.valid());
  EXPECT_NO_THROW(lease.release());
  EXPECT_FALSE(lease.valid());
  EXPECT_TRUE(freed("x"));

  Lease empty;
  EXPECT_NO_THROW(empty.release());
}

TEST_P(Conformance, MovedFromLeaseReleasesNothing) {
  Client a = open_client();
  Lease original = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(original);
  const std::uint64_t token = original.token();

  Lease moved = std::move(original);
  EXPECT_FALSE(original.valid());  // NOLINT(bugprone-use-after-move): that is the point
  EXPECT_NO_THROW(original.release());
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved.token(), token);
  EXPECT_FALSE(grantable("x")) << "releasing a moved-from Lease released the grant";

  moved.release();
  EXPECT_TRUE(freed("x"));
}

TEST_P(Conformance, MoveAssignmentAndDestructorRelease) {
  Client a = open_client();
  Lease lease = a.lock(group(), "first").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  lease = a.lock(group(), "second").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease.name(), "second");
  EXPECT_TRUE(freed("first")) << "move assignment did not release what it held";
  EXPECT_FALSE(grantable("second"));
  { Lease gone = std::move(lease); }
  EXPECT_TRUE(freed("second")) << "the destructor did not release";
}

// unlock() and a dropped Lease send the release and return (docs/contract.md): the
// client itself never sees its own release as still pending.
TEST_P(Conformance, ATryRightAfterAnUnlockOnTheSameClientFindsTheLockFree) {
  Client a = open_client();
  Lock lock = a.lock(group(), "x");
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(lock.try_lock()) << "cycle " << i << ": refused after this thread's unlock";
    lock.unlock();
  }
  for (int i = 0; i < 50; ++i) {
    Sequencer seq;
    {
      Lease dropped = lock.acquire(Mode::exclusive, Wait::none());
      ASSERT_TRUE(dropped);
      seq = dropped.sequencer();
    }
    if (capabilities().check) {
      // A cached lock is still granted: its sequencer stays good until it is given back.
      EXPECT_EQ(a.check(seq), caching()) << "cycle " << i << ": the client's own release not seen";
    }
    // Another thread of the same client, after the drop.
    bool granted = false;
    std::thread([&] {
      granted = static_cast<bool>(lock.acquire(Mode::exclusive, Wait::none()));
    }).join();
    ASSERT_TRUE(granted) << "cycle " << i << ": refused after the client's own release";
  }
}

TEST_P(Conformance, ClosingAClientAnswersItsReleasesFirst) {
  Client next = open_client();
  for (int i = 0; i < 20; ++i) {
    {
      Client a = open_client();
      Lock lock = a.lock(group(), "x");
      lock.lock();
      lock.unlock();
    }
    // No polling: the closed client's release has been answered by the backend.
    Lease lease = next.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease) << "cycle " << i << ": still held after its client closed";
    lease.release();
  }
}

TEST_P(Conformance, ReleaseOrRenewByNonOwnerIsRefused) {
  Client a = open_client();
  Lease lease = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const std::uint64_t token = lease.token();

  // Another process that knows the lock's name (but is not its holder) talks to the
  // backend directly, below the client's bookkeeping.
  std::unique_ptr<core::Engine> intruder =
      compose::open_engine(core::Uri::parse(backend().uri()), ClientOptions{});
  ASSERT_NE(intruder, nullptr);
  std::vector<std::uint64_t> wrong_tokens = {token + 1, token + 1000};
  if (token > 1) wrong_tokens.push_back(token - 1);
  for (std::uint64_t wrong : wrong_tokens) {
    core::GrantRef fake;
    fake.key = core::LockKey{group(), "x"};
    fake.mode = Mode::exclusive;
    fake.token = wrong;
    fake.ttl = std::chrono::milliseconds(30'000);
    fake.owner = "intruder-" + std::to_string(wrong);
    try {
      intruder->release(fake);  // "not held" counts as released: no error needed
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::not_owner) << e.what();
    }
    try {
      const std::vector<core::Renewed> renewed = intruder->renew(std::span(&fake, 1));
      ASSERT_EQ(renewed.size(), 1u);
      EXPECT_FALSE(renewed[0].expires.has_value()) << "renewed a grant it does not hold";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::not_owner) << e.what();
    }
    EXPECT_FALSE(grantable("x")) << "a release with token " << wrong << " freed the lock";
  }
  if (capabilities().check) {
    EXPECT_TRUE(a.check(lease.sequencer()));
  }
  EXPECT_FALSE(lease.lost());
  lease.release();
  EXPECT_TRUE(freed("x"));
}

// DESIGN §2: only the holder renews or releases a grant. Another process that knows the
// lock's key and its grant's *right* token (tokens are small, and public in sequencers)
// but not the backend's owner check (wardend's secret, Redis' random value, etcd's session
// lease, ZooKeeper's session, mem://'s engine) changes nothing. docs/contract.md, "Who can
// renew or release a grant", says which mechanism each engine uses.
TEST_P(Conformance, AStrangerWithTheRightTokenCannotRenewOrReleaseTheGrant) {
  Client a = open_client();
  Lease lease = a.lock(group(), "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  std::unique_ptr<core::Engine> stranger =
      compose::open_engine(core::Uri::parse(backend().uri()), ClientOptions{});
  ASSERT_NE(stranger, nullptr);
  for (const std::string& guess : {std::string(), std::string(32, '0'), std::string("x")}) {
    core::GrantRef forged;
    forged.key = core::LockKey{group(), "x"};
    forged.mode = Mode::exclusive;
    forged.token = lease.token();
    forged.ttl = std::chrono::milliseconds(30'000);
    forged.owner = guess;
    try {
      const std::vector<core::Renewed> renewed = stranger->renew(std::span(&forged, 1));
      ASSERT_EQ(renewed.size(), 1u);
      EXPECT_FALSE(renewed[0].expires.has_value()) << "renewed another's grant: '" << guess << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::not_owner) << e.what();
    }
    try {
      stranger->release(forged);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::not_owner) << e.what();
    }
  }
  EXPECT_TRUE(a.check(lease.sequencer())) << "a stranger released the grant";
  EXPECT_FALSE(grantable("x")) << "a stranger freed the lock";
  EXPECT_FALSE(lease.lost());
  lease.release();
}

TEST_P(Conformance, ExpiredLeaseBlocksTheLockForLockDelayButReleasedOneDoesNot) {
  WARDEN_SKIP_UNLESS(lock_delay);
  Client crashed = open_client_without_renewals();
  Client next = open_client();
  LockOptions delayed = lock_options_with_ttl(300ms);
  delayed.lock_delay = 700ms;

  const auto before = Clock::now();
  Lease lease = crashed.lock(group(), "x", delayed).acquire(Mode::exclusive, Wait::none());
  const auto after = Clock::now();
  ASSERT_TRUE(lease);
  Flag lost;
  std::stop_callback on_token(lease.lost_token(), [&] { lost.set(); });
  ASSERT_TRUE(lost.wait_for(kPatience));

  // Shortly after the lease has certainly expired, the lock-delay still runs.
  std::this_thread::sleep_until(after + delayed.ttl + 100ms);
  LockOptions plain = lock_options();
  Lock lock = next.lock(group(), "x", plain);
  if (Clock::now() < before + delayed.ttl + delayed.lock_delay - 100ms) {
    EXPECT_FALSE(lock.acquire(Mode::exclusive, Wait::none()))
        << "granted during the lock-delay after an expiry";
  }
  Lease successor = lock.acquire(Mode::exclusive, Wait::up_to(kPatience));
  const auto granted_at = Clock::now();
  ASSERT_TRUE(successor) << "the lock stayed blocked after the lock-delay";
  EXPECT_GE(granted_at, before + delayed.ttl + delayed.lock_delay - kClockSlack)
      << "granted before TTL + lock_delay had passed";
  EXPECT_LT(granted_at, after + delayed.ttl + delayed.lock_delay + kPatience);

  // A *released* lease with a lock-delay leaves the lock free at once.
  successor.release();
  LockOptions long_delay = lock_options();
  long_delay.lock_delay = 700ms;
  Client careful = open_client();
  Lease released = careful.lock(group(), "y", long_delay).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(released);
  released.release();
  EXPECT_TRUE(lock.acquire(Mode::exclusive, Wait::none()))
      << "a released (not expired) lock was delayed";
  EXPECT_TRUE(next.lock(group(), "y", plain).acquire(Mode::exclusive, Wait::none()))
      << "a released (not expired) lock was delayed";
}

// One client, two threads, a shared grant each: two grants of one lock, both kept in the
// client's cache when let go on a caching instance. Another client's exclusive wait is
// served soon after both threads let go, whichever lets go first: each revoke the backend
// sends finds its own grant (a revoke lost to the other grant's would leave one cached
// until cache_idle, longer than the bound here).
TEST_P(Conformance, TwoSharedGrantsOfOneClientBothGoToAnotherClientsWaitInEitherOrder) {
  WARDEN_SKIP_UNLESS(shared);
  for (const int first : {0, 1}) {
    SCOPED_TRACE("thread " + std::to_string(first) + " lets go first");
    const std::string name = "x" + std::to_string(first);
    Client a = open_client();
    Client b = open_client();
    std::latch both_granted(2);
    std::array<std::promise<void>, 2> let_go;
    std::vector<std::jthread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i, go = let_go[i].get_future()] {
        Lease lease = a.lock(group(), name).acquire(Mode::shared, Wait::up_to(kPatience));
        EXPECT_TRUE(lease) << "thread " << i << ": a shared grant beside another was refused";
        both_granted.count_down();
        go.wait();
      });  // the Lease is dropped: unlock(), kept in the cache where caching is on
    }
    both_granted.wait();
    auto waiter = std::async(std::launch::async, [&] {
      return b.lock(group(), name).acquire(Mode::exclusive, Wait::up_to(kLongDeadline));
    });
    EXPECT_TRUE(queue_reaches(name, 1)) << "the other client's exclusive request did not queue";
    let_go[first].set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    let_go[1 - first].set_value();
    threads.clear();
    ASSERT_EQ(waiter.wait_for(kPatience), std::future_status::ready)
        << "the other client's wait was not served after both shared grants were let go";
    EXPECT_TRUE(waiter.get());
  }
}

}  // namespace
}  // namespace warden::conformance
