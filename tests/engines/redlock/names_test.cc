// redlock:// lock names are any bytes but NUL, up to 512 of them: braces, colons and
// bytes that are not UTF-8 included. Each name is its own lock, its keys are found on
// every master under its tag "{warden:GROUP/NAME}", and its sequencer checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/sequencer.h"

namespace warden::testing {
namespace {

const std::vector<std::string>& odd_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {
        "a",
        "{",
        "}",
        "{}",
        "a}",
        "{a",
        "{a}",
        "}{",
        "a}:rl",  // the grant key of "a" ends its tag here
        "a}:rf",
        ":",
        "::",
        ":rl",
        "rl:",
        "with space",
        "line\nbreak",
        "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac",  // UTF-8
        "\xff\xfe\x01raw",                             // not UTF-8
        "\x01\x02\x03\x7f\x80\xff",
        std::string(512, 'n'),
        std::string(255, '{') + std::string(257, '}'),
    };
    std::string all_bytes;  // every byte but NUL, twice over
    for (int round = 0; round < 2; ++round) {
      for (int b = 1; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
    }
    n.push_back(all_bytes.substr(0, 510));
    return n;
  }();
  return names;
}

TEST(RedlockNames, OddNamesAreDistinctLocksFoundUnderTheirTags) {
  RedisMasters masters(3);
  Client a = Client::open(masters.uri(), redlock_options());
  Client b = Client::open(masters.uri(), redlock_options());
  const auto& names = odd_names();

  std::vector<Lease> held;
  for (const auto& name : names) {
    held.push_back(a.lock("g", name).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(held.back()) << "'" << name << "' was busy: it shares keys with another name";
    EXPECT_EQ(masters.holding("g", name), (std::vector<int>{0, 1, 2}))
        << "'" << name << "': no grant key " << grant_key("g", name);
    int counters = 0;
    for (const auto& f : masters.fences("g", name)) counters += f ? 1 : 0;
    EXPECT_GE(counters, masters.quorum()) << "'" << name << "': no fence key";
  }
  EXPECT_EQ(masters.grant_keys().size(), 3 * names.size()) << describe_keys(masters.grant_keys());
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(b.lock("g", names[i]).acquire(Mode::exclusive, Wait::none()))
        << "'" << names[i] << "' was granted twice";
    const Sequencer sequencer = held[i].sequencer();
    EXPECT_EQ(Sequencer::parse(sequencer.str()), sequencer);
    EXPECT_TRUE(b.check(sequencer)) << "'" << names[i] << "'";
    EXPECT_TRUE(b.check(sequencer.str())) << "'" << names[i] << "'";
  }
  for (auto& lease : held) lease.release();
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

TEST(RedlockNames, TheSameNameInTwoGroupsIsTwoLocks) {
  RedisMasters masters(3);
  Client a = Client::open(masters.uri(), redlock_options());
  Client b = Client::open(masters.uri(), redlock_options());
  Lease first = a.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(first);
  Lease second = b.lock("h", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(second);
  Lease third = b.lock("g.h-1_2", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(third);
  EXPECT_EQ(masters.holding("h", "x").size(), 3u);
  EXPECT_EQ(masters.holding("g.h-1_2", "x").size(), 3u);
  first.release();
  EXPECT_EQ(masters.holding("h", "x").size(), 3u) << "releasing g/x released h/x";
  second.release();
  third.release();
  EXPECT_TRUE(masters.grant_keys().empty()) << "left:" << describe_keys(masters.grant_keys());
}

}  // namespace
}  // namespace warden::testing
