// warden:// URIs: what is accepted, with which defaults, and what is refused before
// any connection is made.
#include "engines/warden/warden_config.h"

#include <gtest/gtest.h>

#include <string>

#include "core/tls_options.h"
#include "engines/warden/cell_locator.h"
#include "warden/client.h"
#include "warden/error.h"

namespace warden::engines::wardend {
namespace {

using namespace std::chrono_literals;

WardenConfig parse(const std::string& text, const ClientOptions& options = {}) {
  return parse_config(core::Uri::parse(text), options);
}

TEST(WardenConfig, HostAloneGetsTheDefaultPortPoolAndNoPassword) {
  const WardenConfig c = parse("warden://lockhost");
  EXPECT_EQ(c.connect.host, "lockhost");
  EXPECT_EQ(c.connect.port, kDefaultPort);
  EXPECT_EQ(c.pool_size, kDefaultPoolSize);
  EXPECT_FALSE(c.connect.password.has_value());
  EXPECT_FALSE(c.connect.user.has_value());
}

TEST(WardenConfig, PasswordPortPoolAndTimeoutsAreTaken) {
  ClientOptions options;
  options.op_timeout = 1234ms;
  options.retry.initial = 7ms;
  const WardenConfig c = parse("warden://:s%40cret@10.0.0.7:9000?pool=3", options);
  EXPECT_EQ(c.connect.host, "10.0.0.7");
  EXPECT_EQ(c.connect.port, 9000);
  EXPECT_EQ(c.connect.password, "s@cret");
  EXPECT_EQ(c.pool_size, 3u);
  EXPECT_EQ(c.op_timeout, 1234ms);
  EXPECT_EQ(c.connect.timeout, 1234ms) << "connecting is bounded by op_timeout too";
  EXPECT_EQ(c.retry.initial, 7ms);
}

TEST(WardenConfig, UserAndPasswordAreSentAsAuthUserPassword) {
  const WardenConfig c = parse("warden://billing:s3cret@lockhost");
  EXPECT_EQ(c.connect.user, "billing");
  EXPECT_EQ(c.connect.password, "s3cret");
}

TEST(WardenConfig, Ipv6HostIsAccepted) {
  const WardenConfig c = parse("warden://[::1]:7381");
  EXPECT_EQ(c.connect.host, "::1");
  EXPECT_EQ(c.connect.port, 7381);
}

TEST(WardenConfig, SeveralHostsAreTheMembersOfACell) {
  const WardenConfig c = parse("warden://:pw@10.0.0.1:7380,10.0.0.2,[::1]:9000");
  ASSERT_EQ(c.cell.size(), 3u);
  EXPECT_EQ(c.cell[0].to_string(), "10.0.0.1:7380");
  EXPECT_EQ(c.cell[1].to_string(), "10.0.0.2:7380");
  EXPECT_EQ(c.cell[2].to_string(), "[::1]:9000");
  EXPECT_EQ(c.connect.password, "pw");
  EXPECT_TRUE(parse("warden://lockhost").cell.empty());
}

TEST(CellLocator, AMovedErrorNamesTheLeader) {
  EXPECT_EQ(moved_to("MOVED 10.0.0.2:7380"), (resp_client::Endpoint{"10.0.0.2", 7380}));
  EXPECT_EQ(moved_to("MOVED [::1]:7380"), (resp_client::Endpoint{"::1", 7380}));
  for (const char* other : {"MOVED", "MOVED 10.0.0.2", "MOVED 10.0.0.2:0", "MOVED :7380",
                            "MOVED h:99999", "TRYAGAIN the cell has no leader yet", "ERR x"}) {
    EXPECT_FALSE(moved_to(other).has_value()) << other;
  }
}

TEST(WardenConfig, AnythingElseIsRejectedAsInvalidArgument) {
  for (const std::string bad : {
           "warden://",                // no host
           "warden://a:1,a:1",         // a cell's member twice
           "warden://a,a:7380",        //
           "warden://user@host",       // a user needs a password
           "warden://:@host",          // empty password
           "warden://host/db0",        // no path
           "warden://host?pool=0",     // pool out of range
           "warden://host?pool=4097",  //
           "warden://host?pool=-1",    //
           "warden://host?pool=2x",    //
           "warden://host?pool=",      //
           "warden://host?timeout=5",  // unknown parameter
       }) {
    try {
      (void)parse(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad << ": " << e.what();
    }
  }
}

TEST(WardenConfig, ClientOpenRejectsABadUriBeforeConnecting) {
  // Port 1 would refuse a connection (unavailable); invalid_argument shows that
  // validation came first.
  try {
    (void)Client::open("warden://127.0.0.1:1?pool=zero");
    ADD_FAILURE() << "opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("pool"), std::string::npos) << e.what();
  }
}

TEST(WardenConfig, WardensIsWardenWithTlsAndTakesTheCertificateFiles) {
  core::Uri uri = core::Uri::parse("wardens://lockhost?ca=/etc/ca.pem&cert=/c.pem&key=/k.pem");
  core::resolve_tls_scheme(uri);
  const WardenConfig c = parse_config(uri, {});
  EXPECT_EQ(c.connect.host, "lockhost");
  EXPECT_EQ(c.connect.port, kDefaultPort);
  EXPECT_TRUE(c.connect.tls.enabled);
  EXPECT_EQ(c.connect.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(c.connect.tls.cert_file, "/c.pem");
  EXPECT_EQ(c.connect.tls.key_file, "/k.pem");
  EXPECT_FALSE(c.connect.tls.insecure);

  EXPECT_TRUE(parse("warden://lockhost?tls=1&pool=3").connect.tls.enabled);
  EXPECT_FALSE(parse("warden://lockhost").connect.tls.enabled);
}

TEST(WardenConfig, TlsFilesWithoutTlsAreRejected) {
  try {
    parse("warden://lockhost?ca=/etc/ca.pem");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  }
}

}  // namespace
}  // namespace warden::engines::wardend
