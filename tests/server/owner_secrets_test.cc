// The owner secret of a grant is a function of the grant and of the process's own key:
// the same grant gets the same secret every time, any other grant another one, and
// another process (another key) another one for the same grant.
#include "server/owner_secrets.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace warden::server {
namespace {

TEST(OwnerSecretsTest, AGrantsSecretIsTheSameEveryTimeItIsComputed) {
  const OwnerSecrets secrets;
  EXPECT_EQ(secrets.of("g/n", 42), secrets.of("g/n", 42));
}

TEST(OwnerSecretsTest, EveryOtherTokenOrKeyGetsAnotherSecret) {
  const OwnerSecrets secrets;
  std::set<OwnerSecrets::Secret> seen;
  for (std::uint64_t token = 1; token <= 1000; ++token) {
    EXPECT_TRUE(seen.insert(secrets.of("g/n", token)).second) << token;
    EXPECT_TRUE(seen.insert(secrets.of("g/m", token)).second) << token;
  }
  // The token's bytes and the key's are not confused: ("g/n", 1) is not ("", …).
  EXPECT_TRUE(seen.insert(secrets.of("", 1)).second);
}

TEST(OwnerSecretsTest, AnotherProcessComputesAnotherSecretForTheSameGrant) {
  const OwnerSecrets ours;
  const OwnerSecrets theirs;
  EXPECT_NE(ours.of("g/n", 7), theirs.of("g/n", 7));
  EXPECT_NE(ours.of("g/n", 7), OwnerSecrets::Secret{});
}

}  // namespace
}  // namespace warden::server
