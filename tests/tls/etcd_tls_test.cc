// etcds:// (etcd://…?tls=1) against a real etcd serving its client URLs over TLS with
// --client-cert-auth (support/etcd_server.h, certificates from support/test_certs.h):
// a lock cycle over mutual TLS that etcdctl sees from the outside, and every bad case
// refused with its own Errc and a message that says what is wrong — ended by the
// handshake, never by a timeout.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "support/etcd_server.h"
#include "support/server_process.h"
#include "support/test_certs.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

// A refusal must come from the handshake, not from op_timeout running out: the bound
// is below op_timeout (5 s), with room for a loaded sanitizer build.
constexpr auto kRefusedWithin = 4s;

ClientOptions options() {
  ClientOptions o;
  o.op_timeout = 5s;
  return o;
}

const TestCerts& certs() { return TestCerts::shared(); }

std::string ca_query(const CertPair& ca = certs().ca()) { return "?ca=" + ca.cert.string(); }

std::string client_cert_query(const CertPair& client = certs().client()) {
  return "&cert=" + client.cert.string() + "&key=" + client.key.string();
}

// Client::open(uri) throws Error(want) whose message holds `says`, within
// kRefusedWithin.
void refused(const std::string& uri, Errc want, const std::string& says) {
  const auto start = Clock::now();
  try {
    (void)Client::open(uri, options());
    ADD_FAILURE() << "opened " << uri;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), want) << uri << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos)
        << uri << ": '" << e.what() << "' does not say '" << says << "'";
  }
  EXPECT_LT(Clock::now() - start, kRefusedWithin) << uri;
}

// One single-member cluster with mutual TLS for the whole suite: starting etcd is the
// slow part.
class EtcdOverTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new EtcdCluster(EtcdOptions{}, EtcdTls{}); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static EtcdCluster& cluster() { return *cluster_; }
  static std::string port() { return std::to_string(cluster_->client_port(0)); }

 private:
  static EtcdCluster* cluster_;
};
EtcdCluster* EtcdOverTls::cluster_ = nullptr;

TEST_F(EtcdOverTls, LockCycleOverMutualTlsIsSeenByEtcdctlOverTls) {
  // uri() = etcds://127.0.0.1:P?ca=CA&cert=CLIENT&key=KEY
  ASSERT_EQ(cluster().uri().rfind("etcds://", 0), 0u) << cluster().uri();
  Client client = Client::open(cluster().uri(), options());
  Lease lease = client.lock("g", "over-tls").acquire(Mode::exclusive);
  ASSERT_TRUE(lease.valid());
  EXPECT_GT(lease.token(), 0u);
  // cluster().keys() runs etcdctl --endpoints https://… --cacert --cert --key.
  const std::vector<std::string> held = cluster().keys(etcd_lock_prefix("g", "over-tls"));
  ASSERT_EQ(held.size(), 1u);
  EXPECT_NE(held[0].find("/w/"), std::string::npos) << held[0];
  lease.release();
  EXPECT_TRUE(cluster().keys(etcd_lock_prefix("g", "over-tls")).empty());
}

TEST_F(EtcdOverTls, TheHostNameMayBeTheIpAddressOrLocalhost) {
  // The server certificate names DNS:localhost and IP:127.0.0.1; gRPC checks the one the
  // URI connects to.
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    Client client = Client::open(
        "etcds://" + host + ":" + port() + ca_query() + client_cert_query(), options());
    EXPECT_TRUE(client.lock("g", "host-" + host).acquire(Mode::exclusive).valid()) << host;
  }
}

TEST_F(EtcdOverTls, TlsEqualsOneIsTheSameAsEtcds) {
  Client client = Client::open(
      "etcd://127.0.0.1:" + port() + ca_query() + client_cert_query() + "&tls=1", options());
  EXPECT_TRUE(client.lock("g", "tls-1").acquire(Mode::shared).valid());
}

TEST_F(EtcdOverTls, NoClientCertificateIsPermissionDenied) {
  refused("etcds://127.0.0.1:" + port() + ca_query(), Errc::permission_denied,
          "refused our client certificate (none was given");
}

TEST_F(EtcdOverTls, ClientCertificateFromAnotherCaIsPermissionDenied) {
  refused("etcds://127.0.0.1:" + port() + ca_query() + client_cert_query(certs().stranger()),
          Errc::permission_denied, "refused our client certificate (cert=");
}

TEST_F(EtcdOverTls, ServerCertificateFromAnotherCaIsPermissionDenied) {
  refused("etcds://127.0.0.1:" + port() + ca_query(certs().wrong_ca()) + client_cert_query(),
          Errc::permission_denied, "certificate is not trusted");
}

TEST_F(EtcdOverTls, WithoutCaTheSystemRootsRefuseTheTestCa) {
  refused("etcds://127.0.0.1:" + port() + "?cert=" + certs().client().cert.string() +
              "&key=" + certs().client().key.string(),
          Errc::permission_denied, "certificate is not trusted");
}

TEST_F(EtcdOverTls, PlainClientOnTheTlsPortIsUnavailableAndSaysTls) {
  refused("etcd://127.0.0.1:" + port(), Errc::unavailable, "etcds://");
}

TEST_F(EtcdOverTls, UnreadableFilesArePermissionDeniedAndNamed) {
  const std::string missing = (certs().dir() / "no-such.pem").string();
  refused("etcds://127.0.0.1:" + port() + "?ca=" + missing, Errc::permission_denied, missing);
  refused("etcds://127.0.0.1:" + port() + ca_query() + "&cert=" + missing +
              "&key=" + certs().client().key.string(),
          Errc::permission_denied, missing);
}

TEST_F(EtcdOverTls, AFileWithoutPemIsInvalidArgument) {
  TempDir dir("etcd-tls");
  const std::string text = (dir.path() / "not.pem").string();
  std::ofstream(text) << "not a certificate\n";
  refused("etcds://127.0.0.1:" + port() + "?ca=" + text, Errc::invalid_argument, text);
}

TEST_F(EtcdOverTls, InsecureIsUnsupportedForEtcd) {
  refused("etcds://127.0.0.1:" + port() + "?insecure=1", Errc::unsupported, "insecure=1");
}

TEST(EtcdTlsBadServer, ExpiredServerCertificateIsPermissionDenied) {
  EtcdCluster cluster(EtcdOptions{}, EtcdTls{certs().expired(), true});
  refused(cluster.uri(), Errc::permission_denied, "certificate is not trusted");
}

TEST(EtcdTlsBadServer, ServerCertificateForAnotherHostIsPermissionDenied) {
  EtcdCluster cluster(EtcdOptions{}, EtcdTls{certs().wrong_host(), true});
  refused(cluster.uri(), Errc::permission_denied, "does not name the host");
}

TEST(EtcdTlsBadServer, TlsClientOnAPlainEtcdIsUnavailableAndSaysTls) {
  EtcdCluster plain;
  refused("etcds://" + plain.endpoint(0) + ca_query() + client_cert_query(), Errc::unavailable,
          "does not speak TLS");
}

TEST(EtcdTlsBadServer, NobodyListeningIsUnavailable) {
  refused("etcds://127.0.0.1:" + std::to_string(free_port()) + ca_query() + client_cert_query(),
          Errc::unavailable, "127.0.0.1");
}

}  // namespace
}  // namespace warden::testing
