// etcd:// lock names are any bytes but NUL: '/' and '%' are escaped in the key, so no
// lock's keys fall inside another's range ("a" and "a/w" — whose escaped name could
// otherwise look like the writers' range of "a" — are independent locks).
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
  static const std::vector<std::string> names = {
      "a",
      "a/w",
      "a/s",
      "a/w/x",
      "a/",
      "/a",
      "a%2Fw",       // what "a/w" is escaped to
      "a%252Fw",     // ...and that, escaped once more
      "100%",
      "%",
      "with space",
      " ",
      "colon:in:name",
      "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac",  // UTF-8
      "\xff\xfe\x01raw",                              // not UTF-8
      "\xff",
      "line\nbreak",
      std::string(300, 'n') + "/long",
  };
  return names;
}

TEST(EtcdNames, OddNamesAreDistinctLocks) {
  EtcdCluster cluster;
  Client a = Client::open(cluster.uri());
  Client b = Client::open(cluster.uri());
  const auto& names = odd_names();

  std::vector<Lease> held;
  for (const auto& name : names) {
    held.push_back(a.lock("g", name).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(held.back()) << "'" << name << "' was busy: it shares keys with another name";
    EXPECT_EQ(lock_keys(cluster, "g", name).size(), 1u)
        << "'" << name << "':" << describe(lock_keys(cluster, "g", name));
  }
  EXPECT_EQ(warden_keys(cluster).size(), names.size()) << describe(warden_keys(cluster));
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(b.lock("g", names[i]).acquire(Mode::shared, Wait::none()))
        << "'" << names[i] << "' was granted twice";
    const Sequencer sequencer = held[i].sequencer();
    EXPECT_EQ(Sequencer::parse(sequencer.str()), sequencer);
    EXPECT_TRUE(b.check(sequencer)) << "'" << names[i] << "'";
    EXPECT_TRUE(b.check(sequencer.str())) << "'" << names[i] << "'";
  }
  for (auto& lease : held) lease.release();
  EXPECT_TRUE(warden_keys(cluster).empty()) << "left:" << describe(warden_keys(cluster));
}

TEST(EtcdNames, ALockAndANameThatLooksLikeItsWritersRangeDoNotBlockEachOther) {
  EtcdCluster cluster;
  Client a = Client::open(cluster.uri());
  Client b = Client::open(cluster.uri());
  // A writer of "a" is blocked by every key under "a"'s range; a reader only by writers.
  Lease a_shared = a.lock("g", "a").acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(a_shared);
  for (const std::string name : {"a/w", "a/s", "a/w/1", "a/"}) {
    Lease exclusive = b.lock("g", name).acquire(Mode::exclusive, Wait::none());
    EXPECT_TRUE(exclusive) << "'" << name << "' is blocked by a reader of 'a'";
    Lease reader = b.lock("g", "a").acquire(Mode::shared, Wait::none());
    EXPECT_TRUE(reader) << "a reader of 'a' is blocked by a writer of '" << name << "'";
    reader.release();  // a thread holding it shared may not ask for it exclusive
    Lease writer = b.lock("g", "a").acquire(Mode::exclusive, Wait::none());
    EXPECT_FALSE(writer) << "a writer of 'a' got in beside its reader";
  }
  a_shared.release();
  Lease a_exclusive = a.lock("g", "a").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(a_exclusive);
  for (const std::string name : {"a/w", "a/s"}) {
    EXPECT_TRUE(b.lock("g", name).acquire(Mode::exclusive, Wait::none()))
        << "'" << name << "' is blocked by a writer of 'a'";
  }
  // The same name in two groups: two locks.
  EXPECT_TRUE(b.lock("h", "a").acquire(Mode::exclusive, Wait::none()));
  a_exclusive.release();
  EXPECT_TRUE(warden_keys(cluster).empty()) << "left:" << describe(warden_keys(cluster));
}

}  // namespace
}  // namespace warden::testing
