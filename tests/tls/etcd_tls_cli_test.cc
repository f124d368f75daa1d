// `warden run --url etcds://…` end to end: a certificate the member refuses exits 77
// (permission denied), a member nobody serves exits 69 (unavailable), both without
// running the command and without waiting out a timeout.
#include <gtest/gtest.h>

#include <string>

#include "cli/process.h"
#include "support/etcd_server.h"
#include "support/server_process.h"
#include "support/test_certs.h"

namespace warden::cli::testing {
namespace {

using namespace std::chrono_literals;
using warden::testing::EtcdCluster;
using warden::testing::EtcdOptions;
using warden::testing::EtcdTls;
using warden::testing::TestCerts;

const std::string kWarden = WARDEN_CLI_PATH;

// `warden run --url URL … -- true`, ended by the CLI itself well before the test's limit.
Outcome run_with(const std::string& url) {
  return run({kWarden, "run", "--url", url, "--group", "g", "--name", "cli", "--", "true"},
             environment({"WARDEN_URL", "WARDEN_TOKEN", "WARDEN_SEQUENCER"}), 30s);
}

TEST(WardenRunOverEtcds, RefusedClientCertificateExits77) {
  EtcdCluster cluster(EtcdOptions{}, EtcdTls{});
  const TestCerts& certs = TestCerts::shared();
  const Outcome refused =
      run_with("etcds://" + cluster.endpoint(0) + "?ca=" + certs.ca().cert.string() +
               "&cert=" + certs.stranger().cert.string() + "&key=" + certs.stranger().key.string());
  EXPECT_FALSE(refused.timed_out);
  EXPECT_EQ(refused.status, 77) << refused.err;
  EXPECT_NE(refused.err.find("client certificate"), std::string::npos) << refused.err;

  // The same cluster with the right certificate runs the command.
  const Outcome granted = run_with(cluster.uri());
  EXPECT_EQ(granted.status, 0) << granted.err;
}

TEST(WardenRunOverEtcds, NobodyListeningExits69) {
  const TestCerts& certs = TestCerts::shared();
  const Outcome unreachable =
      run_with("etcds://127.0.0.1:" + std::to_string(warden::testing::free_port()) +
               "?ca=" + certs.ca().cert.string());
  EXPECT_FALSE(unreachable.timed_out);
  EXPECT_EQ(unreachable.status, 69) << unreachable.err;
}

}  // namespace
}  // namespace warden::cli::testing
