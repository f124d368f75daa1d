// redlock:// URIs: a bad one is refused by Client::open with invalid_argument before
// anything is connected; the parameters accept their whole ranges; the database in the
// path is where the keys go, on every master.
#include <gtest/gtest.h>

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

TEST(RedlockUri, BadUriFailsOpenWithInvalidArgumentBeforeConnecting) {
  // Port 1 refuses connections (that would be unavailable): invalid_argument shows the
  // URI was refused before any connection was tried.
  const std::string h = "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3";
  std::string seventeen;
  for (int i = 1; i <= 17; ++i) {
    seventeen += (i > 1 ? "," : "") + ("127.0.0.1:" + std::to_string(i));
  }
  const std::vector<std::string> bad_uris = {
      "redlock://",                                     // no hosts
      "redlock:///3",                                   // no hosts, a db
      "redlock://:pw@",                                 // no hosts, a password
      "redlock://127.0.0.1:1,127.0.0.1:1",              // the same master twice
      "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:1",  //
      "redlock://" + seventeen,                         // more than 16 masters
      "redlock://:@" + h,                               // empty password
      "redlock://user:@" + h,                           //
      "redlock://" + h + "?ttl=5",                      // unknown parameter
      "redlock://" + h + "?node_timeout=100",           // ...close to a known one
      "redlock://" + h + "?waiter_ttl_ms=1000",         // redis://'s, not ours
      "redlock://" + h + "?node_timeout_ms=0",          // below 1
      "redlock://" + h + "?node_timeout_ms=60001",      // above 60000
      "redlock://" + h + "?node_timeout_ms=-5",         //
      "redlock://" + h + "?node_timeout_ms=1s",         //
      "redlock://" + h + "?node_timeout_ms=",           //
      "redlock://" + h + "?retry_count=1001",           // above 1000
      "redlock://" + h + "?retry_count=-1",             //
      "redlock://" + h + "?retry_count=three",          //
      "redlock://" + h + "?retry_delay_ms=60001",       //
      "redlock://" + h + "?retry_delay_ms=-1",          //
      "redlock://" + h + "?retry_delay_ms=2.5",         //
      "redlock://" + h + "?retry_jitter_ms=60001",      //
      "redlock://" + h + "?retry_jitter_ms=x",          //
      "redlock://" + h + "?pool=0",                     // below 1
      "redlock://" + h + "?pool=65",                    // above 64
      "redlock://" + h + "?pool=zero",                  //
      "redlock://" + h + "/db3",                        // the db is a number
      "redlock://" + h + "/-1",                         //
      "redlock://127.0.0.1:70000,127.0.0.1:2",          // port out of range
      "redlock://127.0.0.1:0,127.0.0.1:2",              // port 0
      "redlock://127.0.0.1:1,",                         // trailing ','
      "redlock://127.0.0.1:1,,127.0.0.1:2",             // empty host
      "redlocks://" + h,                                // wrong scheme
      "redlock:" + h,                                   //
  };
  // The hosts are ports 1 and 2, which refuse connections (unavailable):
  // invalid_argument shows the URI was refused before any connection was tried.
  for (const std::string& bad : bad_uris) {
    try {
      (void)Client::open(bad, quick_options());
      ADD_FAILURE() << "opened " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find(":pw@"), std::string::npos)
          << "the error shows the password: " << e.what();
    }
  }
}

TEST(RedlockUri, ParametersAcceptTheirWholeRanges) {
  RedisMasters masters(3);
  for (const std::string query : {
           "node_timeout_ms=60000&retry_count=0&retry_delay_ms=0&retry_jitter_ms=0&pool=1",
           "node_timeout_ms=5000&retry_count=1000&retry_delay_ms=60000&retry_jitter_ms=60000"
           "&pool=64",
           "pool=16",
       }) {
    try {
      Client client = Client::open(masters.uri(query), redlock_options());
      Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
      EXPECT_TRUE(lease) << query;
      lease.release();
    } catch (const Error& e) {
      ADD_FAILURE() << query << ": " << to_string(e.code()) << ": " << e.what();
    }
  }
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockUri, SixteenMastersAndOneMasterAreValid) {
  RedisMasters one(1);
  Client client = Client::open(one.uri(), redlock_options());
  Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  EXPECT_EQ(one.holding("g", "x"), std::vector<int>{0});
  lease.release();

  // Sixteen masters, nine of them (a quorum) real: the URI is valid and the lock works.
  RedisMasters nine(9);
  std::vector<int> all;
  for (int i = 0; i < 9; ++i) all.push_back(i);
  std::string uri = nine.uri_of(all);
  for (int i = 0; i < 7; ++i) uri += ",127.0.0.1:" + std::to_string(free_port());
  Client sixteen = Client::open(uri, redlock_options());
  lease = sixteen.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease) << "9 of 16 masters are a quorum";
  EXPECT_EQ(nine.holding("g", "x"), all);
  lease.release();
  EXPECT_TRUE(nine.grant_keys().empty()) << "left:" << describe_keys(nine.grant_keys());
}

TEST(RedlockUri, TheDatabaseInThePathHoldsTheKeysOnEveryMaster) {
  RedisMasters masters(3);
  Client db3 = Client::open(masters.uri() + "/3", redlock_options());
  Client db0 = Client::open(masters.uri(), redlock_options());
  Lease in3 = db3.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(in3);
  EXPECT_EQ(masters.holding("g", "x", 3), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(masters.grant_keys(0).empty())
      << "keys in db 0:" << describe_keys(masters.grant_keys(0));
  Lease in0 = db0.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(in0) << "the lock in db 0 is another lock than the one in db 3";
  in0.release();
  in3.release();
  EXPECT_TRUE(masters.grant_keys(3).empty()) << "left:" << describe_keys(masters.grant_keys(3));
}

}  // namespace
}  // namespace warden::testing
