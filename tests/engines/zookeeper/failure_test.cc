// zk:// when the URI is wrong or nobody answers: a bad URI is refused at Client::open
// before anything is connected, an ensemble that does not answer fails the open with
// unavailable within op_timeout (and so does every call once the server is gone), and a
// URI whose first server is dead still works through the next.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

TEST(ZkFailure, BadUriFailsOpenWithInvalidArgumentBeforeConnecting) {
  // Port 1 refuses connections (that would be unavailable): invalid_argument shows the
  // URI was refused before any connection was tried.
  for (const std::string bad : {
           "zk://",                                        // no host
           "zk:///warden",                                 // no host, a prefix
           "zk://127.0.0.1:1?ttl=5",                       // unknown parameter
           "zk://127.0.0.1:1?session_timeout=4000",        // ...close to a known one
           "zk://127.0.0.1:1?session_timeout_ms=999",      // below 1000
           "zk://127.0.0.1:1?session_timeout_ms=600001",   // above 600000
           "zk://127.0.0.1:1?session_timeout_ms=-5",       //
           "zk://127.0.0.1:1?session_timeout_ms=4s",       //
           "zk://127.0.0.1:1?session_timeout_ms=",         //
           "zk://127.0.0.1:1?on_suspend=maybe",            // neither lose nor wait
           "zk://127.0.0.1:1?on_suspend=",                 //
           "zk://127.0.0.1:1?on_suspend=LOSE",             //
           "zk://127.0.0.1:1/a/../b",                      // '..' segment
           "zk://127.0.0.1:1/a/./b",                       // '.' segment
           "zk://127.0.0.1:1/..",                          //
           "zk://127.0.0.1:1/a b",                         // a space
           "zk://127.0.0.1:1/a%20b",                       // ...escaped
           "zk://127.0.0.1:1//a",                          // empty segment
           "zk://127.0.0.1:1/a//b",                        //
           "zk://127.0.0.1:1/a%00b",                       // NUL
           "zk://127.0.0.1:1/a%0Ab",                       // a control character
           "zk://127.0.0.1:1/caf%C3%A9",                   // not ASCII
           "zk://user@127.0.0.1:1",                        // a user without a password
           "zk://:pw@127.0.0.1:1",                         // a password without a user
           "zk://user:@127.0.0.1:1",                       // empty password
           "zk://us%3Aer:pw@127.0.0.1:1",                  // ':' in the user name
           "zk://127.0.0.1:0",                             // port 0
           "zk://127.0.0.1:70000",                         // port out of range
           "zk://127.0.0.1:1,",                            // trailing ','
           "zk://127.0.0.1:1,,127.0.0.1:2",                // empty host
       }) {
    try {
      (void)Client::open(bad, quick_options());
      ADD_FAILURE() << "opened " << bad;
    } catch (const Error& e) {
      // invalid_argument, not unavailable: refused by the URI check, never tried.
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad << ": " << e.what();
    }
  }
}

TEST(ZkFailure, UnreachableEnsembleFailsOpenWithUnavailableWithinOpTimeout) {
  const ClientOptions options = quick_options(1000ms);
  const std::string one = dead_host();
  const std::string two = dead_host();
  auto took = fails_with(Errc::unavailable, [&] { (void)Client::open("zk://" + one, options); });
  EXPECT_LT(took, options.op_timeout + kPrompt);
  took = fails_with(Errc::unavailable,
                    [&] { (void)Client::open("zk://" + one + "," + two + "/p", options); });
  EXPECT_LT(took, options.op_timeout + kPrompt);
}

TEST(ZkFailure, DeadFirstServerIsSkippedAndAKilledServerFailsCallsWithinOpTimeout) {
  ZooKeeperEnsemble zk;
  const ClientOptions options = quick_options(1000ms);
  const std::string live = "127.0.0.1:" + std::to_string(zk.client_port(0));
  for (int i = 0; i < 3; ++i) {  // the C client may shuffle the list: try a few times
    const auto started = Clock::now();
    Client client = Client::open("zk://" + dead_host() + "," + live, options);
    EXPECT_LT(Clock::now() - started, options.op_timeout + kPrompt);
    Lease lease = client.lock("g", "x").acquire(Mode::exclusive, Wait::none());
    ASSERT_TRUE(lease);
    EXPECT_TRUE(client.check(lease.sequencer()));
    EXPECT_EQ(requests(zk, "g", "x"), 1u);
    lease.release();
    EXPECT_EQ(requests(zk, "g", "x"), 0u) << describe(lock_children(zk, "g", "x"));
  }

  // The only server killed: every call fails in about op_timeout, none hangs.
  Client client = Client::open(zk.uri(), options);
  Lease held = client.lock("g", "y").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  zk.kill9(0);
  const auto bound = 2 * options.op_timeout + kPrompt;
  for (const Wait wait : {Wait::none(), Wait::up_to(10s)}) {
    const auto started = Clock::now();
    try {
      const Lease lease = client.lock("g", "x").acquire(Mode::exclusive, wait);
      ADD_FAILURE() << "acquire without a server returned " << (lease ? "a lease" : "nothing");
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == Errc::unavailable || e.code() == Errc::deadline_exceeded)
          << to_string(e.code()) << ": " << e.what();
    }
    EXPECT_LT(Clock::now() - started, bound);
  }
  {
    const auto started = Clock::now();
    try {
      (void)client.check(held.sequencer());
      ADD_FAILURE() << "check without a server returned";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == Errc::unavailable || e.code() == Errc::deadline_exceeded)
          << to_string(e.code()) << ": " << e.what();
    }
    EXPECT_LT(Clock::now() - started, bound);
  }
  // on_suspend=lose: the holder was told at the disconnect.
  EXPECT_TRUE(eventually([&] { return held.lost(); }, kPrompt));
  EXPECT_NO_THROW(held.release());
}

}  // namespace
}  // namespace warden::testing
