// redlock:// Client::open PINGs every master: it fails with unavailable when fewer than
// a quorum answer (all gone, most gone, most frozen), and with permission_denied when
// the masters refuse the password; with a quorum answering it opens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "support/server_process.h"
#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(RedlockFailure, NoMasterAnsweringFailsOpenWithUnavailable) {
  std::string uri = "redlock://";
  for (int i = 0; i < 3; ++i)
    uri += (i > 0 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(free_port());
  // Refused connections are answers: open fails with them rather than wait out its
  // op_timeout (30 s, far beyond any slowness of the machine).
  ClientOptions options = redlock_options();
  options.op_timeout = 30s;
  auto took = fails_with(Errc::unavailable, [&] { (void)Client::open(uri, options); });
  EXPECT_LT(took, options.op_timeout) << "open waited out its op_timeout on refused ports";

  RedisMasters masters(5);
  for (int i = 0; i < masters.size(); ++i) masters.server(i).kill9();
  took = fails_with(Errc::unavailable, [&] { (void)Client::open(masters.uri(), options); });
  EXPECT_LT(took, options.op_timeout) << "open waited out its op_timeout on killed masters";
}

TEST(RedlockFailure, FewerThanAQuorumAnsweringFailsOpenAndAQuorumOpens) {
  RedisMasters masters(5);
  masters.server(0).kill9();
  masters.server(1).kill9();
  {
    Client client = Client::open(masters.uri(), redlock_options());  // 3 of 5
    Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    EXPECT_TRUE(lease);
  }
  masters.server(2).kill9();
  fails_with(Errc::unavailable, [&] { (void)Client::open(masters.uri(), redlock_options()); });
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockFailure, FrozenMajorityFailsOpenWithUnavailableWithinItsTimeouts) {
  RedisMasters masters(5);
  const RedlockParams params;
  // The contract does not say which timeout bounds open's PINGs: the node timeout or
  // op_timeout. Either way it must end within the longer of the two.
  ClientOptions options = redlock_options();
  options.op_timeout = 1000ms;
  for (int i : {0, 1, 2}) masters.server(i).pause();  // the kernel accepts; nobody answers
  const auto took = fails_with(Errc::unavailable,
                               [&] { (void)Client::open(masters.uri(params.query()), options); });
  std::printf("open with 3 of 5 masters frozen failed in %.3f s\n", seconds(took));
  EXPECT_LT(took, std::max<Clock::duration>(params.node_timeout, options.op_timeout) + kSlack)
      << "open did not end by its timeouts";
  for (int i : {0, 1, 2}) masters.server(i).resume();
}

TEST(RedlockFailure, WrongPasswordFailsOpenWithPermissionDenied) {
  RedisOptions secured;
  secured.password = "s3cret";
  RedisMasters masters(3, secured);
  std::vector<int> all = {0, 1, 2};
  const std::string bare = masters.uri_of(all).substr(std::string("redlock://:s3cret@").size());
  fails_with(Errc::permission_denied,
             [&] { (void)Client::open("redlock://:wrong@" + bare, redlock_options()); });

  Client client = Client::open(masters.uri(), redlock_options());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_EQ(masters.holding("g", "x"), all);
  lease.release();
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockFailure, MissingPasswordFailsOpenWithPermissionDenied) {
  // The masters refuse every command (NOAUTH): our credentials (none) were refused,
  // and retrying cannot help, so permission_denied as redis:// says, not unavailable.
  RedisOptions secured;
  secured.password = "s3cret";
  RedisMasters masters(3, secured);
  const std::string bare = masters.uri().substr(std::string("redlock://:s3cret@").size());
  fails_with(Errc::permission_denied,
             [&] { (void)Client::open("redlock://" + bare, redlock_options()); });
}

TEST(RedlockFailure, AclUserIsUsedAndAWrongOneRefused) {
  RedisOptions acl;
  acl.password = "default-secret";
  acl.acl_user = "alice";
  acl.acl_password = "wonderland";
  RedisMasters masters(3, acl);
  const std::string hosts = masters.uri().substr(std::string("redlock://alice:wonderland@").size());
  fails_with(Errc::permission_denied, [&] {
    (void)Client::open("redlock://alice:looking-glass@" + hosts, redlock_options());
  });
  fails_with(Errc::permission_denied,
             [&] { (void)Client::open("redlock://bob:wonderland@" + hosts, redlock_options()); });

  Client client = Client::open(masters.uri(), redlock_options());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  for (int i = 0; i < masters.size(); ++i) {
    const std::string clients = masters.command(i, {"CLIENT", "LIST"});
    EXPECT_NE(clients.find(" user=alice "), std::string::npos) << "m" << i << ":\n" << clients;
    EXPECT_EQ(clients.find(" user=default "), std::string::npos)
        << "m" << i << ": a connection as the default user:\n"
        << clients;
  }
  lease.release();
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
