// wardend's commands and replies as the engine builds and reads them (docs/protocol.md),
// and the error mapping they go through.
#include "engines/warden/protocol.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engines/resp_client/errors.h"
#include "warden/error.h"

namespace warden::engines::wardend {
namespace {

using namespace std::chrono_literals;
using resp_client::array_reply;
using resp_client::bulk_reply;
using resp_client::error_reply;
using resp_client::integer_reply;
using resp_client::nil_reply;
using resp_client::status_reply;

core::AcquireRequest request(Clock::time_point deadline) {
  core::AcquireRequest r;
  r.key = core::LockKey{"billing", "invoice/7 x"};
  r.mode = Mode::exclusive;
  r.options.ttl = 30'000ms;
  r.deadline = deadline;
  return r;
}

Errc code_of(const Reply& reply) {
  try {
    (void)parse_flag(reply, "TEST");
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error for " << reply.describe();
  return Errc::internal;
}

TEST(WardendProtocol, TrySendsNoWait) {
  const auto now = Clock::now();
  for (auto deadline : {Clock::time_point::min(), now, now - 1s}) {
    const AcquireCommand c = acquire_command(request(deadline), now);
    EXPECT_FALSE(c.waits);
    EXPECT_EQ(c.command, (Command{"ACQUIRE", "billing/invoice/7 x", "exclusive", "30000"}));
  }
}

TEST(WardendProtocol, WaitSendsTheTimeLeftRoundedUpOrForever) {
  const auto now = Clock::now();
  AcquireCommand c = acquire_command(request(now + 1500us), now);
  EXPECT_TRUE(c.waits);
  EXPECT_EQ(c.command,
            (Command{"ACQUIRE", "billing/invoice/7 x", "exclusive", "30000", "WAIT", "2"}));

  c = acquire_command(request(Clock::time_point::max()), now);
  EXPECT_TRUE(c.waits);
  EXPECT_EQ(c.command.back(), "FOREVER");

  // Longer than wardend accepts for WAIT: the same as forever.
  c = acquire_command(request(now + std::chrono::hours(24 * 365 * 30)), now);
  EXPECT_EQ(c.command.back(), "FOREVER");
}

TEST(WardendProtocol, SharedUnfairAndDelayAreSpelledOut) {
  auto r = request(Clock::time_point::min());
  r.mode = Mode::shared;
  r.options.fairness = Fairness::non_fair;
  r.options.lock_delay = 250ms;
  EXPECT_EQ(
      acquire_command(r, Clock::now()).command,
      (Command{"ACQUIRE", "billing/invoice/7 x", "shared", "30000", "UNFAIR", "DELAY", "250"}));
}

TEST(WardendProtocol, ACampaignCarriesItsValueAndProclaimTheOwnerSecret) {
  auto r = request(Clock::time_point::max());
  r.value = std::string("node-a\0:8080", 12);
  EXPECT_EQ(acquire_command(r, Clock::now()).command,
            (Command{"ACQUIRE", "billing/invoice/7 x", "exclusive", "30000", "FOREVER", "VALUE",
                     r.value}));
  const std::string secret = "0123456789abcdef0123456789abcdef";
  core::GrantRef g{core::LockKey{"g", "n"}, Mode::exclusive, 42, 900ms, secret};
  EXPECT_EQ(proclaim_command(g, "node-b"), (Command{"PROCLAIM", "g/n", "42", secret, "node-b"}));
  g.owner = "intruder-7";
  EXPECT_THROW((void)proclaim_command(g, "x"), Error) << "not a grant of this engine";
}

TEST(WardendProtocol, CacheAndTheListenerIdEndACachedAcquireOnly) {
  const auto now = Clock::now();
  auto r = request(Clock::time_point::max());
  r.options.lock_delay = 250ms;
  const Command cached = acquire_command(r, now, 42).command;
  EXPECT_EQ(cached, (Command{"ACQUIRE", "billing/invoice/7 x", "exclusive", "30000", "FOREVER",
                             "DELAY", "250", "CACHE", "42"}));

  const Command plain = acquire_command(r, now).command;
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "CACHE"), plain.end());
  EXPECT_EQ(plain, Command(cached.begin(), cached.end() - 2)) << "the same request, uncached";
}

TEST(WardendProtocol, RenewAndReleaseCarryTheOwnerSecretCheckIsByToken) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  core::GrantRef g{core::LockKey{"g", "n"}, Mode::shared, 42, 900ms, secret};
  EXPECT_EQ(renew_command(g), (Command{"RENEW", "g/n", "42", secret, "900"}));
  EXPECT_EQ(release_command(g), (Command{"RELEASE", "g/n", "42", secret}));
  // Anything else is not a grant of this engine: refused before any I/O.
  for (const std::string bad : {"", "intruder-7", "0123456789ABCDEF0123456789ABCDEF"}) {
    g.owner = bad;
    EXPECT_THROW(renew_command(g), Error) << bad;
    try {
      (void)release_command(g);
      ADD_FAILURE() << "accepted owner '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::not_owner);
    }
  }
  EXPECT_EQ(check_command(Sequencer{"g", "n", Mode::shared, 42}),
            (Command{"CHECK", "g/n", "shared", "42"}));
}

TEST(WardendProtocol, AcquireRepliesAreGrantsWithSecretsOrNil) {
  const std::string secret = "00112233445566778899aabbccddeeff";
  const auto grant =
      parse_acquire(array_reply({integer_reply(41), integer_reply(1875), bulk_reply(secret)}), "T");
  ASSERT_TRUE(grant);
  EXPECT_EQ(grant->token, 41u);
  EXPECT_EQ(grant->waited, 1875us);
  EXPECT_EQ(grant->secret, secret);
  EXPECT_FALSE(parse_acquire(nil_reply(), "T"));
  for (const Reply& bad :
       {array_reply({integer_reply(41)}), integer_reply(1),
        array_reply({integer_reply(41), integer_reply(0)}),  // protocol 1: no secret
        array_reply({bulk_reply("41"), integer_reply(0), bulk_reply(secret)}),
        array_reply({integer_reply(0), integer_reply(0), bulk_reply(secret)}),
        array_reply({integer_reply(3), integer_reply(-1), bulk_reply(secret)}),
        array_reply({integer_reply(3), integer_reply(0), bulk_reply("abc")}),
        array_reply({integer_reply(3), integer_reply(0), integer_reply(7)})}) {
    try {
      (void)parse_acquire(bad, "T");
      ADD_FAILURE() << "accepted " << bad.describe();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::internal) << bad.describe();
    }
  }
}

TEST(WardendProtocol, AcquireSetNamesEveryMemberThenTheWait) {
  core::AcquireSetRequest r;
  r.members = {{core::LockKey{"accounts", "alice"}, Mode::exclusive},
               {core::LockKey{"accounts", "bob"}, Mode::shared}};
  r.options.ttl = 5000ms;
  r.options.fairness = Fairness::non_fair;
  const auto now = Clock::now();
  r.deadline = now + 2ms;
  const AcquireCommand c = acquire_set_command(r, now);
  EXPECT_TRUE(c.waits);
  EXPECT_EQ(c.command, (Command{"ACQUIRESET", "5000", "2", "accounts/alice", "exclusive",
                                "accounts/bob", "shared", "WAIT", "2", "UNFAIR"}));
  r.deadline = Clock::time_point::min();
  EXPECT_FALSE(acquire_set_command(r, now).waits);
}

TEST(WardendProtocol, AcquireSetRepliesAreOneGrantPerMemberOrNil) {
  const std::string secret = "00112233445566778899aabbccddeeff";
  const auto one = [&](std::int64_t token) {
    return array_reply({integer_reply(token), integer_reply(10), bulk_reply(secret)});
  };
  const auto grants = parse_acquire_set(array_reply({one(7), one(8)}), 2, "T");
  ASSERT_TRUE(grants);
  ASSERT_EQ(grants->size(), 2u);
  EXPECT_EQ((*grants)[1].token, 8u);
  EXPECT_FALSE(parse_acquire_set(nil_reply(), 2, "T"));
  for (const Reply& bad : {array_reply({one(7)}), array_reply({one(7), nil_reply()}),
                           array_reply({one(7), integer_reply(8)}), one(7)}) {
    try {
      (void)parse_acquire_set(bad, 2, "T");
      ADD_FAILURE() << "accepted " << bad.describe();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::internal) << bad.describe();
    }
  }
}

TEST(WardendProtocol, StartingIsRecognised) {
  EXPECT_TRUE(is_starting(error_reply("STARTING restarted recently; no grants for 900 ms")));
  EXPECT_FALSE(is_starting(error_reply("ERR STARTING")));
  EXPECT_FALSE(is_starting(nil_reply()));
}

TEST(WardendProtocol, FlagsAndErrorCodesMapInOnePlace) {
  EXPECT_TRUE(parse_flag(integer_reply(1), "T"));
  EXPECT_FALSE(parse_flag(integer_reply(0), "T"));
  EXPECT_EQ(code_of(integer_reply(2)), Errc::internal);
  EXPECT_EQ(code_of(status_reply("OK")), Errc::internal);
  EXPECT_EQ(code_of(error_reply("INVALID key must be group/name")), Errc::invalid_argument);
  EXPECT_EQ(code_of(error_reply("NOAUTH authentication required")), Errc::permission_denied);
  EXPECT_EQ(code_of(error_reply("WRONGPASS invalid password")), Errc::permission_denied);
  EXPECT_EQ(code_of(error_reply("LIMIT too many waiters on this key")), Errc::resource_exhausted);
  EXPECT_EQ(code_of(error_reply("STARTING no grants yet")), Errc::unavailable);
  EXPECT_EQ(code_of(error_reply("ERR unknown command 'X'")), Errc::internal);
  EXPECT_EQ(code_of(error_reply("WHATEVER")), Errc::internal);
}

TEST(WardendProtocol, HelloMustComeFromWardend) {
  const Reply wardend = array_reply(
      {bulk_reply("server"), bulk_reply("wardend"), bulk_reply("version"), bulk_reply("0.1.0"),
       bulk_reply("proto"), integer_reply(2), bulk_reply("capabilities"), bulk_reply("shared")});
  EXPECT_EQ(check_hello(wardend, "h:1"), 2) << "the server's protocol";

  const auto code = [](const Reply& r) {
    try {
      check_hello(r, "h:1");
    } catch (const Error& e) {
      return e.code();
    }
    return Errc::internal;
  };
  EXPECT_EQ(code(error_reply("NOAUTH authentication required")), Errc::permission_denied);
  EXPECT_EQ(code(error_reply("ERR unknown command 'HELLO'")), Errc::invalid_argument);
  EXPECT_EQ(code(array_reply({bulk_reply("server"), bulk_reply("redis"), bulk_reply("proto"),
                              integer_reply(2)})),
            Errc::invalid_argument);
  // A later protocol is fine; an older one has no owner secrets and is refused.
  EXPECT_NO_THROW(check_hello(array_reply({bulk_reply("server"), bulk_reply("wardend"),
                                           bulk_reply("proto"), integer_reply(3)}),
                              "h:1"));
  EXPECT_EQ(code(array_reply({bulk_reply("server"), bulk_reply("wardend"), bulk_reply("proto"),
                              integer_reply(1)})),
            Errc::unsupported);
  EXPECT_EQ(code(array_reply({bulk_reply("server"), bulk_reply("wardend")})), Errc::unsupported);
}

}  // namespace
}  // namespace warden::engines::wardend
