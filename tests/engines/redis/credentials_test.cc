// redis:// URIs against a real server: an ACL user with a password, a database other
// than 0, and the pool and waiter_ttl_ms parameters.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

RedisOptions with_acl_user() {
  RedisOptions options;
  options.password = "default-secret";  // the default user needs a password too
  options.acl_user = "alice";
  options.acl_password = "wonderland";
  return options;
}

TEST(RedisCredentials, AclUserAndDatabaseAreUsed) {
  RedisServer server(with_acl_user());
  RedisProbe probe(server);
  Client client = Client::open(server.uri() + "/3");
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);

  EXPECT_FALSE(probe.warden_keys(3).empty()) << "no keys in db 3";
  EXPECT_TRUE(probe.warden_keys(0).empty()) << "keys in db 0:" << describe(probe.warden_keys(0));
  // Every connection the engine made authenticated as alice and selected db 3.
  const std::string clients = probe.command({"CLIENT", "LIST"});
  std::size_t engine_connections = 0;
  for (std::size_t pos = 0; pos < clients.size();) {
    const auto end = clients.find('\n', pos);
    const std::string line = clients.substr(pos, end - pos);
    pos = end == std::string::npos ? clients.size() : end + 1;
    if (line.find(" cmd=client|list ") != std::string::npos) continue;  // the probe
    ++engine_connections;
    EXPECT_NE(line.find(" user=alice "), std::string::npos) << line;
    if (line.find(" sub=0 ") != std::string::npos) {
      EXPECT_NE(line.find(" db=3 "), std::string::npos) << line;
    }
  }
  EXPECT_GE(engine_connections, 1u) << clients;

  EXPECT_TRUE(client.check(lease.sequencer()));
  lease.release();
  EXPECT_TRUE(no_warden_keys(probe, 3)) << "left:" << describe(probe.warden_keys(3));
}

TEST(RedisCredentials, LocksInDifferentDatabasesAreIndependent) {
  RedisServer server;
  RedisProbe probe(server);
  Client db1 = Client::open(server.uri() + "/1");
  Client db2 = Client::open(server.uri() + "/2");
  Lease a = db1.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  Lease b = db2.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(a);
  EXPECT_TRUE(b) << "db 2 saw the lock held in db 1";
  EXPECT_FALSE(
      Client::open(server.uri() + "/1").lock("g", "x").acquire(Mode::exclusive, Wait::none()));
}

TEST(RedisCredentials, WrongAclPasswordOrUnknownUserIsPermissionDenied) {
  RedisServer server(with_acl_user());
  const std::string at = "@127.0.0.1:" + std::to_string(server.port());
  for (const std::string& bad : {"redis://alice:wrong" + at, "redis://mallory:wonderland" + at,
                                 "redis://:wrong" + at, server.bare_uri()}) {
    try {
      (void)Client::open(bad, quick_options());
      ADD_FAILURE() << "opened " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::permission_denied) << bad << ": " << e.what();
    }
  }
  // The default user with its own password is fine too.
  EXPECT_NO_THROW((void)Client::open("redis://:default-secret" + at, quick_options()));
}

TEST(RedisCredentials, PoolAndWaiterTtlParametersAreTaken) {
  RedisServer server;
  RedisProbe probe(server);
  Client client = Client::open(uri_with(server, "pool=2&waiter_ttl_ms=1500"));
  Client other = Client::open(server.uri() + "/0?waiter_ttl_ms=600");
  Lease held = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = acquire_queued(other, probe, "x", Mode::exclusive, Wait::up_to(10s));
  ASSERT_EQ(queued(probe, "g", "x"), 1);
  // Well past its liveness: a waiter that is alive keeps refreshing it.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(queued(probe, "g", "x"), 1) << "a live waiter was evicted from the queue";
  held.release();
  ASSERT_EQ(waiting.wait_for(kNoHang), std::future_status::ready);
  EXPECT_TRUE(waiting.get()) << "the waiter was not granted before its deadline";
  EXPECT_TRUE(no_warden_keys(probe)) << "left:" << describe(probe.warden_keys());
}

}  // namespace
}  // namespace warden::testing
