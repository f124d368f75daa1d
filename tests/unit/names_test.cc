#include "core/names.h"

#include <gtest/gtest.h>

#include <string>

#include "warden/error.h"

namespace warden::core {
namespace {

template <class F>
Errc error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return Errc::internal;
}

TEST(Names, GroupIsOneToSixtyFourSafeCharacters) {
  EXPECT_NO_THROW(validate_group("a"));
  EXPECT_NO_THROW(validate_group("Orders.v2_eu-1"));
  EXPECT_NO_THROW(validate_group(std::string(64, 'g')));
  for (const std::string& bad : {std::string(), std::string(65, 'g'), std::string("a/b"),
                                 std::string("a b"), std::string("a:b"), std::string("\xc3\xa9")}) {
    EXPECT_EQ(error_of([&] { validate_group(bad); }), Errc::invalid_argument) << bad;
  }
}

TEST(Names, NameIsOneToFiveHundredTwelveBytesWithoutNul) {
  EXPECT_NO_THROW(validate_name("x"));
  EXPECT_NO_THROW(validate_name("a/b:c d \xe2\x9c\x93"));
  EXPECT_NO_THROW(validate_name(std::string(512, 'n')));
  EXPECT_EQ(error_of([] { validate_name(""); }), Errc::invalid_argument);
  EXPECT_EQ(error_of([] { validate_name(std::string(513, 'n')); }), Errc::invalid_argument);
  EXPECT_EQ(error_of([] { validate_name(std::string("a\0b", 3)); }), Errc::invalid_argument);
}

TEST(Names, TtlAndLockDelayRanges) {
  using std::chrono::milliseconds;
  EXPECT_NO_THROW(validate_lock_options(LockOptions{}));
  EXPECT_NO_THROW(
      validate_lock_options(LockOptions{milliseconds(10), Fairness::automatic, milliseconds(0)}));
  for (auto ttl : {milliseconds(0), milliseconds(-1), milliseconds(9),
                   milliseconds(7LL * 24 * 3600 * 1000 + 1)}) {
    EXPECT_EQ(error_of([&] {
                validate_lock_options(LockOptions{ttl, Fairness::automatic, milliseconds(0)});
              }),
              Errc::invalid_argument);
  }
  for (auto delay : {milliseconds(-1), milliseconds(3600 * 1000 + 1)}) {
    EXPECT_EQ(error_of([&] {
                validate_lock_options(LockOptions{milliseconds(1000), Fairness::automatic, delay});
              }),
              Errc::invalid_argument);
  }
}

TEST(Names, MissingCapabilitiesAreUnsupported) {
  Capabilities none;
  none.fair = true;
  LockOptions fair;
  fair.fairness = Fairness::fifo;
  EXPECT_EQ(error_of([&] { require_capabilities(none, Mode::shared, fair); }), Errc::unsupported);
  LockOptions unfair;
  unfair.fairness = Fairness::non_fair;
  EXPECT_EQ(error_of([&] { require_capabilities(none, Mode::exclusive, unfair); }),
            Errc::unsupported);
  LockOptions delayed;
  delayed.lock_delay = std::chrono::milliseconds(5);
  EXPECT_EQ(error_of([&] { require_capabilities(none, Mode::exclusive, delayed); }),
            Errc::unsupported);
  EXPECT_NO_THROW(require_capabilities(none, Mode::exclusive, fair));
  EXPECT_NO_THROW(require_capabilities(none, Mode::exclusive, LockOptions{}));
}

TEST(Names, AutomaticFairnessIsWhatTheEngineHas) {
  Capabilities fifo_only;
  fifo_only.fair = true;
  Capabilities barging_only;
  barging_only.non_fair = true;
  Capabilities both = fifo_only;
  both.non_fair = true;
  EXPECT_EQ(fifo_only.resolve(Fairness::automatic), Fairness::fifo);
  EXPECT_EQ(both.resolve(Fairness::automatic), Fairness::fifo);
  EXPECT_EQ(barging_only.resolve(Fairness::automatic), Fairness::non_fair);
  // Explicit requests stay as asked, so an engine without them refuses them.
  EXPECT_EQ(barging_only.resolve(Fairness::fifo), Fairness::fifo);
  LockOptions fifo;
  fifo.fairness = Fairness::fifo;
  EXPECT_EQ(error_of([&] { require_capabilities(barging_only, Mode::exclusive, fifo); }),
            Errc::unsupported);
  EXPECT_NO_THROW(require_capabilities(barging_only, Mode::exclusive, LockOptions{}));
  EXPECT_EQ(to_string(Fairness::automatic), "automatic");
  EXPECT_EQ(to_string(Fairness::fifo), "fifo");
  EXPECT_EQ(to_string(Fairness::non_fair), "non-fair");
}

TEST(Names, ClientOptionsAreChecked) {
  EXPECT_NO_THROW(validate_client_options(ClientOptions{}));
  ClientOptions bad;
  bad.op_timeout = std::chrono::milliseconds(0);
  EXPECT_EQ(error_of([&] { validate_client_options(bad); }), Errc::invalid_argument);
  bad = ClientOptions{};
  bad.retry.jitter = 2;
  EXPECT_EQ(error_of([&] { validate_client_options(bad); }), Errc::invalid_argument);
}

}  // namespace
}  // namespace warden::core
