// wardens:// against a real wardend with a TLS listener (support/tls_wardend.h), with
// certificates the openssl CLI made: the warden:// engine over TLS and mutual TLS, every
// certificate the client must refuse and every one the server must, both wrong-protocol
// cases, and the CLI's exit statuses. The server's side alone is tests/server/
// tls_server_test.cc.
#include <gtest/gtest.h>

#include <string>

#include "support/test_certs.h"
#include "support/tls_wardend.h"
#include "tls/tls_checks.h"
#include "warden/client.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

const TestCerts& certs() { return TestCerts::shared(); }

std::string wardens_at(std::uint16_t port, const std::string& query) {
  return "wardens://127.0.0.1:" + std::to_string(port) + "?" + query;
}

TEST(WardendTlsClient, WardensLocksOverTlsAndMutualTls) {
  TlsWardend tls(false);
  EXPECT_LOCKS(tls.uri(false));
  EXPECT_LOCKS("warden://localhost:" + std::to_string(tls.tls_port) +
               "?tls=1&ca=" + certs().ca().cert.string());
  TlsWardend mutual(true);
  EXPECT_LOCKS(mutual.uri(true));
}

TEST(WardendTlsClient, TlsAndPlainClientsShareOneTable) {
  TlsWardend server(true);
  Client over_tls = Client::open(server.uri(true));
  Client plain = Client::open(server.server.uri());
  Lease held = over_tls.lock("g", "shared-table").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  EXPECT_FALSE(plain.lock("g", "shared-table").acquire(Mode::exclusive, Wait::none()));
  // Renewal and the owner check work over TLS like over plain TCP.
  EXPECT_TRUE(plain.check(held.sequencer()));
  const std::uint64_t first = held.token();
  held.release();
  Lease next = plain.lock("g", "shared-table").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), first);
}

TEST(WardendTlsClient, MutualTlsRefusesAClientWithoutOrWithAStrangersCertificate) {
  TlsWardend server(true);
  const auto none = lock_error(server.uri(false));
  ASSERT_TRUE(none);
  EXPECT_EQ(none->code(), Errc::permission_denied) << none->what();

  const auto stranger =
      lock_error(wardens_at(server.tls_port, "ca=" + certs().ca().cert.string() +
                                                 "&cert=" + certs().stranger().cert.string() +
                                                 "&key=" + certs().stranger().key.string()));
  ASSERT_TRUE(stranger);
  EXPECT_EQ(stranger->code(), Errc::permission_denied) << stranger->what();
}

TEST(WardendTlsClient, TheClientRefusesAServerItCannotTrust) {
  TlsWardend server(false);
  const auto wrong_ca =
      lock_error(wardens_at(server.tls_port, "ca=" + certs().wrong_ca().cert.string()));
  ASSERT_TRUE(wrong_ca);
  EXPECT_EQ(wrong_ca->code(), Errc::permission_denied) << wrong_ca->what();

  // No ca=: the system's trust store, which does not know the test CA.
  const auto system_store = lock_error("wardens://127.0.0.1:" + std::to_string(server.tls_port));
  ASSERT_TRUE(system_store);
  EXPECT_EQ(system_store->code(), Errc::permission_denied) << system_store->what();
}

// An expired certificate never reaches a wardens:// client: wardend refuses to start
// with one (tests/server/tls_server_test.cc); the client's own refusal of an expired
// certificate is the same code as rediss:// (tests/tls/redis_tls_test.cc).
TEST(WardendTlsClient, ACertificateForAnotherHostIsRefused) {
  Wardend server({"--tls-listen", "127.0.0.1:0", "--tls-cert", certs().wrong_host().cert.string(),
                  "--tls-key", certs().wrong_host().key.string()});
  const auto error = lock_error(
      wardens_at(wardend_tls_port(server.process()), "ca=" + certs().ca().cert.string()));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::permission_denied) << error->what();
  EXPECT_TRUE(contains(error->what(), "IP address mismatch")) << error->what();
}

TEST(WardendTlsClient, WrongProtocolOnEitherPortIsUnavailable) {
  TlsWardend server(false);
  // TLS to the plain port: wardend answers a ClientHello with a RESP error and closes.
  const auto tls_to_plain =
      lock_error(wardens_at(server.server.port(), "ca=" + certs().ca().cert.string()));
  ASSERT_TRUE(tls_to_plain);
  EXPECT_EQ(tls_to_plain->code(), Errc::unavailable) << tls_to_plain->what();
  EXPECT_TRUE(contains(tls_to_plain->what(), "TLS")) << tls_to_plain->what();

  // Plain to the TLS port: wardend fails the handshake and closes.
  const auto plain_to_tls = lock_error("warden://127.0.0.1:" + std::to_string(server.tls_port));
  ASSERT_TRUE(plain_to_tls);
  EXPECT_EQ(plain_to_tls->code(), Errc::unavailable) << plain_to_tls->what();
}

TEST(WardendTlsClient, TheCliExits77ForCertificatesAnd69ForUnreachable) {
  TlsWardend server(true);
  const auto ok = warden_run(server.uri(true));
  EXPECT_EQ(ok.status, 0) << ok.err;

  const auto no_cert = warden_run(server.uri(false));
  EXPECT_EQ(no_cert.status, 77) << no_cert.err;

  const auto wrong_ca =
      warden_run(wardens_at(server.tls_port, "ca=" + certs().wrong_ca().cert.string() +
                                                 "&cert=" + certs().client().cert.string() +
                                                 "&key=" + certs().client().key.string()));
  EXPECT_EQ(wrong_ca.status, 77) << wrong_ca.err;

  const auto closed = warden_run(wardens_at(free_port(), "ca=" + certs().ca().cert.string()));
  EXPECT_EQ(closed.status, 69) << closed.err;
}

}  // namespace
}  // namespace warden::testing
