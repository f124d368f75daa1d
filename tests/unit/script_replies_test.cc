// The Lua scripts' replies as results (engines/redis/script_replies.h,
// engines/redlock/script_replies.h): what a well-behaved server answers, and what a
// server answering garbage gets instead of an overflow.
#include "engines/redis/script_replies.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engines/redlock/quorum.h"
#include "engines/redlock/script_replies.h"
#include "engines/resp_client/reply.h"
#include "warden/error.h"

namespace warden::engines {
namespace {

using resp_client::array_reply;
using resp_client::bulk_reply;
using resp_client::error_reply;
using resp_client::integer_reply;
using resp_client::Reply;

// The code of the Error attempt_of throws for `reply`; nullopt if it accepts it.
std::optional<Errc> attempt_error(const Reply& reply) {
  try {
    redis::attempt_of(reply, "acquire on h:1");
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

TEST(RedisScriptReplies, AttemptIsAGrantOrATimeToWait) {
  const redis::Attempt granted =
      redis::attempt_of(array_reply({integer_reply(1), integer_reply(42)}), "acquire on h:1");
  EXPECT_TRUE(granted.granted);
  EXPECT_EQ(granted.token, 42u);

  const redis::Attempt waiting =
      redis::attempt_of(array_reply({integer_reply(0), integer_reply(1500)}), "acquire on h:1");
  EXPECT_FALSE(waiting.granted);
  EXPECT_EQ(waiting.retry_ms, 1500);

  const redis::Attempt nothing_runs_out =
      redis::attempt_of(array_reply({integer_reply(0), integer_reply(-1)}), "acquire on h:1");
  EXPECT_EQ(nothing_runs_out.retry_ms, -1);

  EXPECT_EQ(attempt_error(error_reply("NOSCRIPT No matching script")), Errc::internal);
  EXPECT_EQ(attempt_error(error_reply("LOADING Redis is loading")), Errc::unavailable);
}

// Found by fuzz/resp_reply_fuzz.cc: the engine adds retry_ms + 1 to the clock, so a
// retry of INT64_MAX overflowed (undefined behaviour) instead of failing the call.
TEST(RedisScriptReplies, AttemptOutOfRangeIsAnUnexpectedReply) {
  for (const std::int64_t retry : {std::int64_t{0}, std::int64_t{-2}, redis::kMaxRetry.count() + 1,
                                   std::int64_t{9'223'372'036'854'775'807}}) {
    EXPECT_EQ(attempt_error(array_reply({integer_reply(0), integer_reply(retry)})), Errc::internal)
        << retry;
  }
  EXPECT_EQ(attempt_error(array_reply({integer_reply(2), integer_reply(5)})), Errc::internal);
  EXPECT_EQ(attempt_error(array_reply({integer_reply(1), integer_reply(0)})), Errc::internal);
  EXPECT_EQ(attempt_error(array_reply({integer_reply(0)})), Errc::internal);
  EXPECT_EQ(attempt_error(integer_reply(1)), Errc::internal);
}

Reply token_reply(const std::string& last, const std::string& seconds, const std::string& micros) {
  return array_reply({integer_reply(1), bulk_reply(last), bulk_reply(seconds), bulk_reply(micros)});
}

TEST(RedlockScriptReplies, TokenReadIsAVoteWithTheMastersReads) {
  const auto yes = redlock::token_read_of(token_reply("41", "1700000000", "123456"));
  ASSERT_TRUE(yes.has_value() && yes->has_value());
  EXPECT_EQ((*yes)->last, 41u);
  EXPECT_EQ((*yes)->clock_us, 1'700'000'000'123'456u);

  const auto no = redlock::token_read_of(array_reply({integer_reply(0)}));
  ASSERT_TRUE(no.has_value());
  EXPECT_FALSE(no->has_value());

  EXPECT_FALSE(redlock::token_read_of(error_reply("ERR")).has_value());
  EXPECT_FALSE(redlock::token_read_of(token_reply("x", "1", "1")).has_value());
}

TEST(RedlockScriptReplies, GrantedTokenIsTheOnlyMastersWholeAcquire) {
  const auto granted =
      redlock::granted_token_of(array_reply({integer_reply(1), bulk_reply("1700000000123457")}));
  ASSERT_TRUE(granted.has_value() && granted->has_value());
  EXPECT_EQ(**granted, 1'700'000'000'123'457u);

  const auto held = redlock::granted_token_of(array_reply({integer_reply(0)}));
  ASSERT_TRUE(held.has_value());
  EXPECT_FALSE(held->has_value());

  EXPECT_FALSE(redlock::granted_token_of(error_reply("NOSCRIPT")).has_value());
  EXPECT_FALSE(redlock::granted_token_of(array_reply({integer_reply(1)})).has_value());
  EXPECT_FALSE(
      redlock::granted_token_of(array_reply({integer_reply(1), bulk_reply("0")})).has_value())
      << "token 0 is no grant's";
  EXPECT_FALSE(
      redlock::granted_token_of(array_reply({integer_reply(1), bulk_reply("18446744073709551616")}))
          .has_value())
      << "a token beyond 64 bits";
  EXPECT_FALSE(
      redlock::granted_token_of(array_reply({integer_reply(0), bulk_reply("5")})).has_value());
}

// Found by fuzz/resp_reply_fuzz.cc: next_token is one more than the largest read, so a
// master answering last = 2^64-1 (or a TIME that wraps seconds * 10^6 + micros) made
// the fencing token wrap to 0 or below earlier grants'. Such answers are failed votes.
TEST(RedlockScriptReplies, ReadsThatWouldWrapTheTokenAreFailedVotes) {
  EXPECT_FALSE(redlock::token_read_of(token_reply("18446744073709551615", "0", "0")));
  EXPECT_FALSE(redlock::token_read_of(token_reply("1", "18446744073709551615", "0")));
  EXPECT_FALSE(redlock::token_read_of(token_reply("1", "18446744073709", "0")));
  EXPECT_FALSE(redlock::token_read_of(token_reply("1", "1", "1000000")));

  const auto top = redlock::token_read_of(token_reply("18446744073709551614", "1", "0"));
  ASSERT_TRUE(top.has_value() && top->has_value());
  const std::vector<redlock::TokenRead> reads = {**top};
  EXPECT_EQ(redlock::next_token(reads), 18'446'744'073'709'551'615u);
}

TEST(RedlockScriptReplies, YesOrNoIsAnIntegerOneOrZero) {
  EXPECT_EQ(redlock::yes_or_no(integer_reply(1)), true);
  EXPECT_EQ(redlock::yes_or_no(integer_reply(0)), false);
  EXPECT_EQ(redlock::yes_or_no(integer_reply(2)), std::nullopt);
  EXPECT_EQ(redlock::yes_or_no(bulk_reply("1")), std::nullopt);
}

}  // namespace
}  // namespace warden::engines
