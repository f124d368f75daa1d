// zk:// and TLS: Debian's ZooKeeper C client has no TLS, so tls=1 is refused as
// unsupported with advice, before any connection; the other TLS keys without tls=1 are
// the invalid_argument every engine gives (core/tls_options.h).
#include <gtest/gtest.h>

#include <string>

#include "core/uri.h"
#include "engines/zookeeper/zk_config.h"
#include "warden/client.h"
#include "warden/error.h"

namespace warden {
namespace {

// Port 1: nobody listens, so a URI that got as far as connecting would fail otherwise.
TEST(ZkTls, TlsIsUnsupportedAndTheMessageSaysHowToTunnel) {
  for (const std::string uri : {"zk://127.0.0.1:1?tls=1", "zk://127.0.0.1:1/locks?tls=true",
                                "zk://127.0.0.1:1?tls=1&ca=/etc/ssl/ca.pem"}) {
    try {
      (void)Client::open(uri);
      ADD_FAILURE() << "opened " << uri;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unsupported) << uri << ": " << e.what();
      const std::string message = e.what();
      EXPECT_NE(message.find("no zookeeper_init_ssl"), std::string::npos) << message;
      EXPECT_NE(message.find("stunnel"), std::string::npos) << message;
      EXPECT_NE(message.find("ssh -L"), std::string::npos) << message;
    }
  }
}

TEST(ZkTls, OtherTlsKeysWithoutTlsAreInvalidArgument) {
  for (const std::string uri : {"zk://127.0.0.1:1?ca=/etc/ssl/ca.pem",
                                "zk://127.0.0.1:1?insecure=1", "zk://127.0.0.1:1?tls=maybe"}) {
    try {
      (void)Client::open(uri);
      ADD_FAILURE() << "opened " << uri;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << uri << ": " << e.what();
    }
  }
}

TEST(ZkTls, TlsZeroIsPlainZk) {
  const engines::zookeeper::ZkConfig config = engines::zookeeper::parse_config(
      core::Uri::parse("zk://127.0.0.1:2181/locks?tls=0&session_timeout_ms=5000"), {});
  EXPECT_EQ(config.hosts, "127.0.0.1:2181");
  EXPECT_EQ(config.prefix, "/locks");
  EXPECT_EQ(config.session_timeout, std::chrono::milliseconds(5000));
}

}  // namespace
}  // namespace warden
