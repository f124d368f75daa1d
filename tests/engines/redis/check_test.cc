// redis:// Client::check: a sequencer "group/name:mode:token" checks true only while
// the grant it names is held in that mode: a token of an exclusive grant presented as
// shared (or the other way round) names no grant, and does not check.
#include <gtest/gtest.h>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/sequencer.h"

namespace warden::testing {
namespace {

Sequencer with_mode(Sequencer sequencer, Mode mode) {
  sequencer.mode = mode;
  return sequencer;
}

TEST(RedisCheck, ExclusiveGrantDoesNotCheckAsShared) {
  RedisServer server;
  Client client = Client::open(server.uri());
  Client other = Client::open(server.uri());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  const Sequencer held = lease.sequencer();
  ASSERT_EQ(held.mode, Mode::exclusive);
  EXPECT_TRUE(other.check(held));
  EXPECT_FALSE(other.check(with_mode(held, Mode::shared)))
      << "an exclusive grant's token checked as a shared grant";
  EXPECT_FALSE(other.check(with_mode(held, Mode::shared).str()));
  lease.release();
  EXPECT_FALSE(other.check(held));
}

TEST(RedisCheck, SharedGrantDoesNotCheckAsExclusive) {
  RedisServer server;
  Client client = Client::open(server.uri());
  Client other = Client::open(server.uri());
  Lease lease = client.lock("g", "x").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(lease);
  const Sequencer held = lease.sequencer();
  ASSERT_EQ(held.mode, Mode::shared);
  EXPECT_TRUE(other.check(held));
  EXPECT_FALSE(other.check(with_mode(held, Mode::exclusive)))
      << "a shared grant's token checked as an exclusive grant";
  EXPECT_FALSE(other.check(with_mode(held, Mode::exclusive).str()));
  lease.release();
  EXPECT_FALSE(other.check(held));
}

// Two modes held one after the other: each token checks in its own mode only.
TEST(RedisCheck, EachGrantChecksInItsOwnModeOnly) {
  RedisServer server;
  Client client = Client::open(server.uri());
  Lease reader = client.lock("g", "x").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(reader);
  const Sequencer shared = reader.sequencer();
  reader.release();
  Lease writer = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(writer);
  const Sequencer exclusive = writer.sequencer();
  EXPECT_FALSE(client.check(shared)) << "a released shared grant still checks";
  EXPECT_FALSE(client.check(with_mode(shared, Mode::exclusive)));
  EXPECT_TRUE(client.check(exclusive));
  EXPECT_FALSE(client.check(with_mode(exclusive, Mode::shared)));
  writer.release();
}

}  // namespace
}  // namespace warden::testing
