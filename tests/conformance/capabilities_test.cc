// Conformance: the engine reports exactly the capabilities its EngineCase pins
// (DESIGN §2 "Capabilities an engine cannot offer ... are reported by the engine").
//
// Clauses skip on a capability the pinned set lacks; the pin keeps an engine that
// quietly stops reporting a capability from turning its clauses into skips.
#include "conformance/conformance_suite.h"

namespace warden::conformance {
namespace {

TEST_P(Conformance, ReportsItsPinnedCapabilities) {
  const Capabilities& pinned = capabilities();
  const Capabilities& reported = reported_capabilities();
  EXPECT_EQ(reported.shared, pinned.shared) << "shared";
  EXPECT_EQ(reported.fair, pinned.fair) << "fair";
  EXPECT_EQ(reported.non_fair, pinned.non_fair) << "non_fair";
  EXPECT_EQ(reported.lock_delay, pinned.lock_delay) << "lock_delay";
  EXPECT_EQ(reported.fencing, pinned.fencing) << "fencing";
  EXPECT_EQ(reported.durable_tokens, pinned.durable_tokens) << "durable_tokens";
  EXPECT_EQ(reported.check, pinned.check) << "check";
  EXPECT_EQ(reported.semaphore, pinned.semaphore) << "semaphore";
  EXPECT_EQ(reported.atomic_multi, pinned.atomic_multi) << "atomic_multi";
  EXPECT_EQ(reported.election, pinned.election) << "election";
  EXPECT_EQ(reported.watch, pinned.watch) << "watch";
  EXPECT_EQ(reported.cache, pinned.cache) << "cache";
  // A client opened the ordinary way reports the same.
  const Capabilities again = open_client().capabilities();
  EXPECT_EQ(again.shared, pinned.shared);
  EXPECT_EQ(again.fair, pinned.fair);
  EXPECT_EQ(again.non_fair, pinned.non_fair);
}

// LockOptions::cache follows the pinned capability: where the engine cannot cache,
// a cached lock's acquire is refused as unsupported and changes nothing.
//
// Where pinned: a lock released into the cache comes back with the same token, and a
// waiter of another client gets it long before it would idle out (an hour here): the
// engine's revokes work (docs/contract.md, Lock caching).
TEST_P(Conformance, LockCachingIsOfferedExactlyWherePinned) {
  ClientOptions client_options = Conformance::client_options();
  client_options.cache_idle = std::chrono::hours(1);
  Client client = open_client(client_options);
  LockOptions options = lock_options();
  options.cache = true;
  Lock lock = client.lock(group(), "cached", options);
  if (!capabilities().cache) {
    EXPECT_TRUE(throws_error(Errc::unsupported,
                             [&] { (void)lock.acquire(Mode::exclusive, Wait::none()); }));
    EXPECT_TRUE(grantable("cached"));
    return;
  }
  std::uint64_t token = 0;
  {
    Lease lease = lock.acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    token = lease.token();
  }
  {
    Lease again = lock.acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(again);
    EXPECT_EQ(again.token(), token) << "a re-acquire from the cache keeps the grant";
  }
  Client other = open_client();
  LockOptions uncached = lock_options();
  uncached.cache = false;
  Lease theirs = other.lock(group(), "cached", uncached).acquire(Mode::exclusive,
                                                                 Wait::up_to(kPatience));
  ASSERT_TRUE(theirs) << "the cached lock was not given back to a waiter";
  EXPECT_GT(theirs.token(), token);
}

// Client::election follows the pinned capability: an Election where it is pinned
// (ElectionConformance checks the rest), Error(unsupported) before any I/O elsewhere.
TEST_P(Conformance, ElectionsAreOfferedExactlyWherePinned) {
  Client client = open_client();
  try {
    const Election election = client.election(group(), "leader");
    EXPECT_TRUE(capabilities().election) << "an engine without elections gave an Election";
    EXPECT_EQ(election.name(), "leader");
  } catch (const Error& e) {
    EXPECT_FALSE(capabilities().election) << e.what();
    EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
  }
}

}  // namespace
}  // namespace warden::conformance
