// redis:// Client::inspect and Client::list beyond the conformance clauses
// (tests/conformance/status_test.cc): a server that is down is unavailable, and reading
// changes none of the lock's keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "support/status_checks.h"
#include "test_util.h"
#include "warden/error.h"
#include "warden/status.h"

namespace warden::testing {
namespace {

TEST(RedisInspect, ADownServerIsUnavailable) {
  RedisServer server;
  Client client = Client::open(server.uri());
  server.kill9();
  expect_status_fails(client);
}

TEST(RedisInspect, ReadingChangesNoKey) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(server.uri());
  // Both forms of :i (lua/lock_base.lua): the string of an exclusive holder alone, the
  // hash once a shared holder is there.
  Lease held = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  Lease shared = client.lock("g", "s").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(shared);
  expect_status_reads_only(client, [&] {
    std::string records;
    for (const auto& key : probe.warden_keys()) records += key + '\n';
    return records + probe.command({"GET", lock_tag("g", "n") + ":i"}) + '\n' +
           probe.command({"HGETALL", lock_tag("g", "s") + ":i"});
  });
}

}  // namespace
}  // namespace warden::testing
