// The test certificates are what their names say, checked by the openssl CLI itself, so
// a TLS test that passes or fails does so for the reason it claims.
#include "support/test_certs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace warden::testing {
namespace {

// `openssl verify [extra] -CAfile ca cert` succeeds.
bool verifies(const CertPair& ca, const CertPair& cert, const std::string& extra = "") {
  const std::string command = "openssl verify " + extra + " -CAfile '" + ca.cert.string() + "' '" +
                              cert.cert.string() + "' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

TEST(TestCerts, TheGoodOnesVerifyAgainstTheirCaAndForTheirUse) {
  const TestCerts& certs = TestCerts::shared();
  EXPECT_TRUE(
      verifies(certs.ca(), certs.server(), "-purpose sslserver -verify_hostname localhost"));
  EXPECT_TRUE(verifies(certs.ca(), certs.server(), "-verify_ip 127.0.0.1"));
  EXPECT_TRUE(verifies(certs.ca(), certs.client(), "-purpose sslclient"));
  EXPECT_TRUE(verifies(certs.wrong_ca(), certs.stranger(), "-purpose sslclient"));
}

TEST(TestCerts, TheBadOnesFailForTheirOwnReason) {
  const TestCerts& certs = TestCerts::shared();
  EXPECT_FALSE(verifies(certs.wrong_ca(), certs.server()));
  EXPECT_FALSE(verifies(certs.ca(), certs.stranger()));
  EXPECT_FALSE(verifies(certs.ca(), certs.expired()));
  EXPECT_TRUE(verifies(certs.ca(), certs.expired(), "-no_check_time"));
  EXPECT_FALSE(verifies(certs.ca(), certs.wrong_host(), "-verify_hostname localhost"));
  EXPECT_TRUE(verifies(certs.ca(), certs.wrong_host(), "-verify_hostname wrong.example"));
}

}  // namespace
}  // namespace warden::testing
