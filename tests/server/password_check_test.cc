// wardend's password comparison: equal passwords match, anything else does not —
// including a prefix, an extension, a different length and the empty string. (That it
// takes the same time whatever differs is a property of its construction, SHA-256 and
// CRYPTO_memcmp, not something a test can time reliably.)
#include "server/password_check.h"

#include <gtest/gtest.h>

#include <string>

namespace warden::server {
namespace {

TEST(PasswordCheck, OnlyTheSamePasswordMatches) {
  EXPECT_TRUE(password_matches("s3cret", "s3cret"));
  EXPECT_FALSE(password_matches("s3creT", "s3cret"));
  EXPECT_FALSE(password_matches("s3cre", "s3cret"));
  EXPECT_FALSE(password_matches("s3crets", "s3cret"));
  EXPECT_FALSE(password_matches("", "s3cret"));
  EXPECT_TRUE(password_matches("", ""));
  const std::string with_nul("a\0b", 3);
  EXPECT_FALSE(password_matches("a", with_nul));
  EXPECT_TRUE(password_matches(with_nul, with_nul));
  EXPECT_FALSE(password_matches(std::string(100'000, 'x'), "s3cret"));
}

}  // namespace
}  // namespace warden::server
