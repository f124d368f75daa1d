// rediss:// and redlock://?tls=1 against real redis-server TLS ports, with certificates
// the openssl CLI made (support/test_certs.h): the good cases lock, the bad ones each
// fail at once with their own Errc and message, and the CLI turns them into exit 77
// (certificates) or 69 (unreachable).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/process.h"
#include "support/redis_masters.h"
#include "support/redis_server.h"
#include "support/test_certs.h"
#include "tls/tls_checks.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/options.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

const TestCerts& certs() { return TestCerts::shared(); }

// A redis-server with a TLS port presenting `server_cert`.
RedisOptions tls_options(const CertPair& server_cert, bool auth_clients = false) {
  RedisOptions options;
  options.tls = RedisTlsOptions{server_cert.cert, server_cert.key, certs().ca().cert, auth_clients};
  return options;
}

std::string client_cert_query(const CertPair& pair) {
  return "cert=" + pair.cert.string() + "&key=" + pair.key.string();
}

// `redis-cli --tls` as a stranger to warden would run it; its output.
std::string redis_cli_tls(const RedisServer& server, const std::vector<std::string>& command) {
  // redis-cli is installed beside redis-server.
  const std::string server_path = redis_server_path();
  const std::string redis_cli = server_path.substr(0, server_path.rfind('/') + 1) + "redis-cli";
  std::vector<std::string> argv = {
      redis_cli, "--tls",     "--cacert", certs().ca().cert.string(),
      "-h",      "127.0.0.1", "-p",       std::to_string(server.tls_port())};
  argv.insert(argv.end(), command.begin(), command.end());
  const auto outcome = cli::testing::run(argv, cli::testing::environment({}), 30s);
  EXPECT_EQ(outcome.status, 0) << outcome.err;
  return outcome.out;
}

TEST(RedisTls, RedissLocksAndRedisCliReadsTheKeyOverTls) {
  RedisServer server(tls_options(certs().server()));
  Client client = Client::open(server.tls_uri());
  Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  // The engine's lock info key, "TOKEN OWNER" for an exclusive holder alone in its
  // lock (lua/lock_base.lua's string form), read from outside over TLS.
  const std::string info = lock_tag("g", "n") + ":i";
  const std::string holder = redis_cli_tls(server, {"GET", info});
  EXPECT_EQ(holder.rfind(std::to_string(lease.token()) + " ", 0), 0u) << holder;
  EXPECT_TRUE(client.check(lease.sequencer()));
  lease.release();
  EXPECT_EQ(redis_cli_tls(server, {"EXISTS", info}), "0\n");
}

TEST(RedisTls, ServerCertificateIsAcceptedByIpAndByName) {
  RedisServer server(tls_options(certs().server()));
  EXPECT_LOCKS(server.tls_uri("127.0.0.1"));
  EXPECT_LOCKS(server.tls_uri("localhost"));
  // redis://?tls=1 is the same as rediss://.
  EXPECT_LOCKS("redis://127.0.0.1:" + std::to_string(server.tls_port()) +
               "?tls=1&ca=" + certs().ca().cert.string());
}

TEST(RedisTls, WaitersAreWokenOverTls) {
  RedisServer server(tls_options(certs().server()));
  Client holder = Client::open(server.tls_uri());
  Client waiter = Client::open(server.tls_uri());
  Lease held = holder.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.lock("g", "n").acquire(Mode::exclusive, Wait::up_to(30s));
  });
  std::this_thread::sleep_for(200ms);  // let it queue (not required for the outcome)
  held.release();
  ASSERT_EQ(waiting.wait_for(kNoHang), std::future_status::ready);
  EXPECT_TRUE(waiting.get());
}

TEST(RedisTls, RedlockOverThreeTlsMasters) {
  RedisMasters masters(3, tls_options(certs().server()));
  std::string uri = "redlock://";
  for (int i = 0; i < masters.size(); ++i) {
    if (i > 0) uri += ",";
    uri += "localhost:" + std::to_string(masters.server(i).tls_port());
  }
  uri += "?tls=1&ca=" + certs().ca().cert.string();
  Client client = Client::open(uri);
  Lease lease = client.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(lease);
  // Written on every master (read on their plain ports).
  EXPECT_EQ(masters.holding("g", "n"), (std::vector<int>{0, 1, 2}));
  lease.release();
  EXPECT_TRUE(masters.holding("g", "n").empty());
}

TEST(RedisTls, MutualTlsNeedsOurCertificateSignedByTheServersCa) {
  RedisServer server(tls_options(certs().server(), /*auth_clients=*/true));
  EXPECT_LOCKS(server.tls_uri("127.0.0.1", client_cert_query(certs().client())));

  const auto none = lock_error(server.tls_uri());
  ASSERT_TRUE(none);
  EXPECT_EQ(none->code(), Errc::permission_denied) << none->what();
  EXPECT_TRUE(contains(none->what(), "requires a client certificate")) << none->what();

  const auto stranger =
      lock_error(server.tls_uri("127.0.0.1", client_cert_query(certs().stranger())));
  ASSERT_TRUE(stranger);
  EXPECT_EQ(stranger->code(), Errc::permission_denied) << stranger->what();
  EXPECT_TRUE(contains(stranger->what(), "refused our client certificate")) << stranger->what();
}

TEST(RedisTls, ServerSignedByAnotherCaIsRejected) {
  RedisServer server(tls_options(certs().server()));
  const auto error = lock_error("rediss://127.0.0.1:" + std::to_string(server.tls_port()) +
                                "?ca=" + certs().wrong_ca().cert.string());
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::permission_denied) << error->what();
  // The server sends its CA along: OpenSSL finds a root it was not told to trust.
  EXPECT_TRUE(contains(error->what(), "was rejected: self-signed certificate in certificate chain"))
      << error->what();
  EXPECT_TRUE(contains(error->what(), certs().wrong_ca().cert.string())) << error->what();
}

TEST(RedisTls, ExpiredServerCertificateIsRejected) {
  RedisServer server(tls_options(certs().expired()));
  const auto error = lock_error(server.tls_uri());
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::permission_denied) << error->what();
  EXPECT_TRUE(contains(error->what(), "certificate has expired")) << error->what();
}

TEST(RedisTls, CertificateForAnotherHostIsRejectedByIpAndByName) {
  RedisServer server(tls_options(certs().wrong_host()));
  const auto by_ip = lock_error(server.tls_uri("127.0.0.1"));
  ASSERT_TRUE(by_ip);
  EXPECT_EQ(by_ip->code(), Errc::permission_denied) << by_ip->what();
  EXPECT_TRUE(contains(by_ip->what(), "IP address mismatch")) << by_ip->what();

  const auto by_name = lock_error(server.tls_uri("localhost"));
  ASSERT_TRUE(by_name);
  EXPECT_EQ(by_name->code(), Errc::permission_denied) << by_name->what();
  EXPECT_TRUE(contains(by_name->what(), "hostname mismatch")) << by_name->what();
}

TEST(RedisTls, InsecureSkipsVerificationAndSaysSoOnStderr) {
  RedisServer server(tls_options(certs().wrong_host()));
  ::testing::internal::CaptureStderr();
  const auto error =
      lock_error("rediss://127.0.0.1:" + std::to_string(server.tls_port()) + "?insecure=1");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(error) << error->what();
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.tls_port());
  EXPECT_TRUE(contains(err, "warden: WARNING: insecure=1: the TLS certificate of " + endpoint +
                                " is not checked; use only in tests"))
      << err;
}

TEST(RedisTls, TlsToThePlainPortIsUnavailable) {
  RedisServer server(tls_options(certs().server()));
  ClientOptions options;
  // A plain Redis may wait for a newline the ClientHello lacks: the handshake then
  // ends at op_timeout.
  options.op_timeout = 2s;
  const auto error = lock_error(
      "rediss://127.0.0.1:" + std::to_string(server.port()) + "?ca=" + certs().ca().cert.string(),
      options);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::unavailable) << error->what();
  EXPECT_TRUE(contains(error->what(), "speak TLS")) << error->what();
}

TEST(RedisTls, PlainToTheTlsPortIsUnavailable) {
  RedisServer server(tls_options(certs().server()));
  const auto error = lock_error("redis://127.0.0.1:" + std::to_string(server.tls_port()));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::unavailable) << error->what();
  EXPECT_TRUE(contains(error->what(), "TLS port")) << error->what();
}

TEST(RedisTls, UnreadableCaFileIsNamed) {
  RedisServer server(tls_options(certs().server()));
  const std::string missing = (certs().dir() / "no-such-ca.pem").string();
  const auto error =
      lock_error("rediss://127.0.0.1:" + std::to_string(server.tls_port()) + "?ca=" + missing);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::permission_denied) << error->what();
  EXPECT_TRUE(contains(error->what(), missing)) << error->what();
  EXPECT_TRUE(contains(error->what(), "No such file")) << error->what();

  // A file that is there but holds no certificate.
  const std::string not_pem = certs().server().key.string();  // a key, not a CA
  const auto garbage =
      lock_error("rediss://127.0.0.1:" + std::to_string(server.tls_port()) + "?ca=" + not_pem);
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->code(), Errc::permission_denied) << garbage->what();
  EXPECT_TRUE(contains(garbage->what(), not_pem)) << garbage->what();
}

TEST(RedisTls, CertificateWithoutItsKeyIsRefused) {
  RedisServer server(tls_options(certs().server(), /*auth_clients=*/true));
  const std::string query =
      "cert=" + certs().client().cert.string() + "&key=" + certs().server().key.string();
  const auto error = lock_error(server.tls_uri("127.0.0.1", query));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::permission_denied) << error->what();
  EXPECT_TRUE(contains(error->what(), "does not match")) << error->what();
  EXPECT_TRUE(contains(error->what(), certs().server().key.string())) << error->what();
}

// ---- The CLI's exit statuses --------------------------------------------------------------

TEST(RedisTlsCli, CertificateProblemsExit77AndUnreachableExits69) {
  RedisServer server(tls_options(certs().server()));
  EXPECT_EQ(warden_run(server.tls_uri()).status, 0);

  const auto wrong_ca = warden_run("rediss://127.0.0.1:" + std::to_string(server.tls_port()) +
                                   "?ca=" + certs().wrong_ca().cert.string());
  EXPECT_EQ(wrong_ca.status, 77) << wrong_ca.err;
  EXPECT_TRUE(contains(wrong_ca.err, "certificate of 127.0.0.1")) << wrong_ca.err;

  const auto plain = warden_run("redis://127.0.0.1:" + std::to_string(server.tls_port()));
  EXPECT_EQ(plain.status, 69) << plain.err;

  const auto closed = warden_run("rediss://127.0.0.1:" + std::to_string(free_port()) +
                                 "?ca=" + certs().ca().cert.string());
  EXPECT_EQ(closed.status, 69) << closed.err;
}

}  // namespace
}  // namespace warden::testing
