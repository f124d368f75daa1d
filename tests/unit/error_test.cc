#include "warden/error.h"

#include <gtest/gtest.h>

namespace warden {
namespace {

TEST(Error, CarriesCodeAndNamesItInTheMessage) {
  const Error e(Errc::unavailable, "redis at h:1 refused the connection");
  EXPECT_EQ(e.code(), Errc::unavailable);
  EXPECT_STREQ(e.what(), "unavailable: redis at h:1 refused the connection");
}

TEST(Error, RetryAdviceFollowsTheCode) {
  EXPECT_EQ(retry_advice(Errc::unavailable), RetryAdvice::same_call);
  EXPECT_EQ(retry_advice(Errc::deadline_exceeded), RetryAdvice::same_call);
  EXPECT_EQ(retry_advice(Errc::lost), RetryAdvice::from_acquire);
  EXPECT_EQ(retry_advice(Errc::resource_exhausted), RetryAdvice::later);
  for (Errc c : {Errc::invalid_argument, Errc::unsupported, Errc::would_deadlock,
                 Errc::not_owner, Errc::permission_denied, Errc::internal}) {
    EXPECT_EQ(retry_advice(c), RetryAdvice::never) << to_string(c);
  }
}

}  // namespace
}  // namespace warden
