// Conformance: identities, options and sequencers are validated before any I/O, and
// capabilities an engine lacks are refused (DESIGN §2 "Identity", "Capabilities").
#include <chrono>
#include <string>
#include <vector>

#include "conformance/conformance_suite.h"
#include "warden/sequencer.h"

namespace warden::conformance {
namespace {

using std::string_literals::operator""s;

TEST_P(Conformance, InvalidGroupIsRejected) {
  Client a = open_client();
  const std::vector<std::string> bad = {
      "", "a/b", std::string(65, 'g'), "a b", "a:b", "gr\xc3\xbcppe", "a\0b"s, "*",
  };
  for (const std::string& group : bad) {
    EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { (void)a.lock(group, "n"); }))
        << "group '" << group << "'";
    EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { (void)a.locks(group); }))
        << "group '" << group << "'";
  }
  // The boundaries are valid.
  for (const std::string& group : {std::string(64, 'g'), "A-z.0_9"s, "g"s}) {
    Lease lease = a.lock(group, "n").acquire(Mode::exclusive, Wait::none());
    EXPECT_TRUE(lease) << "group '" << group << "'";
  }
}

TEST_P(Conformance, InvalidNameIsRejected) {
  Client a = open_client();
  const std::vector<std::string> bad = {"", std::string(513, 'n'), "a\0b"s, "\0"s};
  for (const std::string& name : bad) {
    EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { (void)a.lock(group(), name); }))
        << "name of " << name.size() << " bytes";
    EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { (void)a.locks(group()).get(name); }))
        << "name of " << name.size() << " bytes";
    EXPECT_TRUE(
        throws_error(Errc::invalid_argument,
                     [&] { (void)a.locks(group()).acquire(name, Mode::exclusive, Wait::none()); }))
        << "name of " << name.size() << " bytes";
  }
}

// Names that a naive escaping (for paths, keys, URLs) would mangle or merge. Every one
// is a lock of its own.
std::vector<std::string> unusual_names() {
  std::string every_byte;
  for (int c = 1; c < 256; ++c) every_byte.push_back(static_cast<char>(c));
  const std::string utf8 =
      "zamek-\xc5\x82\xc3\xb3"
      "d\xc5\xba-\xf0\x9f\x94\x92";  // łódź, 🔒
  return {
      "a/b",
      "a_b",
      "a%2Fb",
      "a%2fb",
      "a:b",
      "a b",
      "a  b",
      "/",
      "//",
      "/a",
      "a/",
      "a//b",
      ".",
      "..",
      "x:1",
      "x:1:2",
      "\t",
      "\n",
      "\\",
      "*",
      "a\xff",
      "a\xc3",
      "{x}",
      "x-lock",
      "s-lock",
      utf8,
      every_byte,
      std::string(512, 'n'),
      std::string(511, 'n'),
  };
}

TEST_P(Conformance, UnusualNamesAreValidAndDistinctLocks) {
  Client a = open_client();
  Client b = open_client();
  const std::vector<std::string> names = unusual_names();
  std::vector<Lease> held;
  for (const std::string& name : names) {
    Lease lease = a.locks(group()).acquire(name, Mode::exclusive, Wait::none());
    // Every earlier name is still held by `a`, so a collision shows up as "busy".
    ASSERT_TRUE(lease) << "name " << ::testing::PrintToString(name)
                       << " is busy: it maps to the same lock as an earlier name";
    EXPECT_EQ(lease.name(), name);
    const Sequencer seq = lease.sequencer();
    EXPECT_EQ(seq.name, name);
    EXPECT_EQ(Sequencer::parse(seq.str()), seq) << ::testing::PrintToString(name);
    if (capabilities().check) {
      EXPECT_TRUE(b.check(seq)) << ::testing::PrintToString(name);
    }
    held.push_back(std::move(lease));
  }
  for (const std::string& name : names) {
    EXPECT_FALSE(b.lock(group(), name).acquire(Mode::exclusive, Wait::none()))
        << ::testing::PrintToString(name);
  }
  for (Lease& lease : held) lease.release();  // confirmed before b tries
  for (const std::string& name : names) {
    EXPECT_TRUE(b.lock(group(), name).acquire(Mode::exclusive, Wait::none()))
        << ::testing::PrintToString(name);
  }
}

TEST_P(Conformance, InvalidLockOptionsAreRejected) {
  using std::chrono::milliseconds;
  Client a = open_client();
  std::vector<LockOptions> bad;
  for (milliseconds ttl :
       {milliseconds(0), milliseconds(-1), milliseconds(-30'000), milliseconds(9),
        std::chrono::days(7) + milliseconds(1), milliseconds::max()}) {
    LockOptions options = lock_options();
    options.ttl = ttl;
    bad.push_back(options);
  }
  for (milliseconds delay : {milliseconds(-1), std::chrono::hours(1) + milliseconds(1)}) {
    LockOptions options = lock_options();
    options.lock_delay = delay;
    bad.push_back(options);
  }
  for (const LockOptions& options : bad) {
    const std::string what = "ttl " + std::to_string(options.ttl.count()) + " ms, lock_delay " +
                             std::to_string(options.lock_delay.count()) + " ms";
    EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { (void)a.lock(group(), "x", options); }))
        << what;
    EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { (void)a.locks(group(), options); }))
        << what;
    ClientOptions client_options;
    client_options.lock_defaults = options;
    EXPECT_TRUE(throws_error(Errc::invalid_argument,
                             [&] { (void)Client::open(backend().uri(), client_options); }))
        << "as ClientOptions::lock_defaults: " << what;
  }
  // Nothing was created by the refused calls.
  EXPECT_TRUE(freed("x"));

  // The boundaries are valid.
  LockOptions longest = lock_options();
  longest.ttl = std::chrono::days(7);
  EXPECT_NO_THROW((void)a.lock(group(), "x", longest));
  LockOptions shortest = lock_options();
  shortest.ttl = milliseconds(10);
  EXPECT_NO_THROW((void)a.lock(group(), "x", shortest));
  if (capabilities().lock_delay) {
    LockOptions delayed = lock_options();
    delayed.lock_delay = std::chrono::hours(1);
    EXPECT_NO_THROW((void)a.lock(group(), "x", delayed));
  }
}

TEST_P(Conformance, MalformedSequencersAreRejected) {
  Client a = open_client();
  const std::vector<std::string> bad = {
      "",
      "g",
      "g/n",
      "g/n:x:1",
      "g/n:exclusive:abc",
      "g/n:exclusive:",
      "g/n:exclusive:-1",
      "g/n:exclusive:1x",
      "g/n:exclusive:18446744073709551616",  // 2^64
      "g/n:EXCLUSIVE:1",
      "g/n:1",
      "/n:exclusive:1",
      "g/:exclusive:1",
      "bad group/n:exclusive:1",
      "g/n\0x:exclusive:1"s,
  };
  for (const std::string& text : bad) {
    EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { (void)Sequencer::parse(text); }))
        << ::testing::PrintToString(text);
    if (capabilities().check) {
      EXPECT_TRUE(throws_error(Errc::invalid_argument, [&] { (void)a.check(text); }))
          << ::testing::PrintToString(text);
    }
  }
  // The largest token is fine.
  const Sequencer max = Sequencer::parse("g/n:shared:18446744073709551615");
  EXPECT_EQ(max.token, UINT64_MAX);
  EXPECT_EQ(max.mode, Mode::shared);
}

TEST_P(Conformance, CapabilityTheEngineLacksIsRefusedAsUnsupported) {
  const Capabilities caps = capabilities();
  if (caps.shared && caps.fair && caps.non_fair && caps.lock_delay && caps.check &&
      caps.semaphore) {
    GTEST_SKIP() << GetParam().name << " offers every optional capability";
  }
  Client a = open_client();
  // Refused when the lock is made or when it is used; either way before any grant.
  auto refused = [&](LockOptions options, Mode mode) {
    return throws_error(Errc::unsupported, [&] {
      Lease lease = a.lock(group(), "x", options).acquire(mode, Wait::none());
    });
  };
  if (!caps.shared) {
    EXPECT_TRUE(refused(lock_options(), Mode::shared)) << "shared";
  }
  if (!caps.fair) {
    LockOptions fair = lock_options();
    fair.fairness = Fairness::fifo;
    EXPECT_TRUE(refused(fair, Mode::exclusive)) << "fair";
  }
  if (!caps.non_fair) {
    LockOptions barging = lock_options();
    barging.fairness = Fairness::non_fair;
    EXPECT_TRUE(refused(barging, Mode::exclusive)) << "non_fair";
  }
  if (!caps.lock_delay) {
    LockOptions delayed = lock_options();
    delayed.lock_delay = std::chrono::milliseconds(500);
    EXPECT_TRUE(refused(delayed, Mode::exclusive)) << "lock_delay";
  }
  if (!caps.check) {
    EXPECT_TRUE(throws_error(Errc::unsupported, [&] {
      (void)a.check(Sequencer{group(), "x", Mode::exclusive, 1});
    })) << "check";
  }
  if (!caps.semaphore) {
    EXPECT_TRUE(throws_error(Errc::unsupported, [&] { a.semaphore(group(), "x", 2); }))
        << "semaphore";
  }
  EXPECT_TRUE(freed("x")) << "a refused request left something behind";
}

}  // namespace
}  // namespace warden::conformance
