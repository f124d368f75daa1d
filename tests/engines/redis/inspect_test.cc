// redis:// Client::inspect and Client::list beyond the conformance clauses
// (tests/conformance/status_test.cc): a server that is down is unavailable, and reading
// changes none of the lock's keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

TEST(RedisInspect, ADownServerIsUnavailable) {
  RedisServer server;
  Client client = Client::open(server.uri());
  server.kill9();
  for (const bool listing : {false, true}) {
    try {
      if (listing) {
        client.list("g");
      } else {
        client.inspect("g", "n");
      }
      ADD_FAILURE() << "no error from a stopped server";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unavailable) << e.what();
    }
  }
}

TEST(RedisInspect, ReadingChangesNothing) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  Client other = Client::open(server.uri());
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  const auto keys = probe.warden_keys();
  const std::string info = probe.command({"HGETALL", lock_tag("g", "n") + ":i"});
  for (int i = 0; i < 3; ++i) {
    client.inspect("g", "n");
    other.list("g");
  }
  EXPECT_EQ(probe.warden_keys(), keys);
  EXPECT_EQ(probe.command({"HGETALL", lock_tag("g", "n") + ":i"}), info);
  EXPECT_FALSE(other.lock("g", "n").acquire(Mode::exclusive, Wait::none()));
  const auto token = held.token();
  held.release();
  Lease next = other.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
}

}  // namespace
}  // namespace warden::testing
