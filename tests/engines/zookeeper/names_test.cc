// zk:// lock names are any bytes but NUL: every byte outside [A-Za-z0-9_~-] is
// percent-escaped in the lock's node name, so '/' does not nest one lock's node in
// another's, "." and ".." (which ZooKeeper refuses as path segments) are ordinary names,
// control and non-UTF-8 bytes reach the server as plain ASCII, and a name that looks
// like another's escaped form is a lock of its own.
#include <gtest/gtest.h>

#include <set>
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
      "a/b",
      "a/b/c",
      "a/",
      "/a",
      "/",
      "a%2Fb",    // what "a/b" is escaped to
      "a%252Fb",  // ...and that, escaped once more
      "100%",
      "%",
      "%%",
      ".",
      "..",
      "...",
      "./a",
      "a/..",
      "../..",
      "with space",
      " ",
      "  ",
      "x-GUID-0000000001",  // looks like a request node
      "zookeeper",
      "colon:in:name",
      "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac",  // UTF-8
      "\xf0\x9f\x94\x92",                            // UTF-8 outside the BMP
      "\xef\xbf\xbf",                                // U+FFFF, refused by ZooKeeper as is
      "\xff\xfe\x01raw",                             // not UTF-8
      "\xff",
      "line\nbreak",
      "tab\there",
      "\x7f",
      std::string(300, 'n') + "/long",
      std::string(512, '\xff'),  // the longest name, every byte escaped
  };
  return names;
}

TEST(ZkNames, OddNamesAreDistinctLocks) {
  ZooKeeperEnsemble zk;
  const ClientOptions options = with_ttl(4s);
  Client a = Client::open(zk.uri(), options);
  Client b = Client::open(zk.uri(), options);
  const auto& names = odd_names();

  std::vector<Lease> held;
  std::set<std::string> nodes;
  for (const auto& name : names) {
    held.push_back(a.lock("g", name).acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(held.back()) << "'" << name << "' was busy: it shares a node with another name";
    const auto children = lock_children(zk, "g", name);
    EXPECT_EQ(children.size(), 1u) << "'" << name << "':" << describe(children);
    nodes.insert(zk_lock_path("g", name));
  }
  EXPECT_EQ(nodes.size(), names.size()) << "two names share a lock node";
  // One lock node per name, right under the group: nothing nested.
  EXPECT_EQ(zk.children("/warden/g").size(), names.size()) << describe(zk.children("/warden/g"));
  EXPECT_EQ(warden_tree(zk).size(), 1 + 2 * names.size()) << describe(warden_tree(zk));

  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(b.lock("g", names[i]).acquire(Mode::shared, Wait::none()))
        << "'" << names[i] << "' was granted twice";
    const Sequencer sequencer = held[i].sequencer();
    EXPECT_EQ(Sequencer::parse(sequencer.str()), sequencer);
    EXPECT_TRUE(b.check(sequencer)) << "'" << names[i] << "'";
    EXPECT_TRUE(b.check(sequencer.str())) << "'" << names[i] << "'";
  }
  for (auto& lease : held) lease.release();
  for (const auto& name : names) {
    EXPECT_EQ(requests(zk, "g", name), 0u) << "'" << name << "'";
  }
  // Released one by one, each name is free again for the other Client.
  for (const auto& name : names) {
    EXPECT_TRUE(b.lock("g", name).acquire(Mode::exclusive, Wait::none())) << "'" << name << "'";
  }
  EXPECT_TRUE(empty_prefix(zk)) << "left:" << describe(warden_tree(zk));
}

TEST(ZkNames, TheSameNameInTwoGroupsOrUnderTwoPrefixesIsTwoLocks) {
  ZooKeeperEnsemble zk;
  Client a = Client::open(zk.uri());
  Client other_prefix = Client::open(zk.uri("/apps/locks"));
  Lease ga = a.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(ga);
  Lease ha = a.lock("h", "n").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(ha) << "the same name in another group is blocked";
  Lease pa = other_prefix.lock("g", "n").acquire(Mode::exclusive, Wait::none());
  EXPECT_TRUE(pa) << "the same name under another prefix is blocked";
  EXPECT_EQ(zk.children(zk_lock_path("g", "n", "/apps/locks")).size(), 1u)
      << describe(zk.tree("/apps"));
  EXPECT_EQ(requests(zk, "g", "n"), 1u);
  EXPECT_EQ(requests(zk, "h", "n"), 1u);
  EXPECT_FALSE(other_prefix.check(ga.sequencer())) << "a prefix sees another's grant";
  EXPECT_TRUE(other_prefix.check(pa.sequencer()));
  ga = Lease();
  ha = Lease();
  pa = Lease();
  EXPECT_TRUE(empty_prefix(zk)) << "left:" << describe(warden_tree(zk));
  EXPECT_TRUE(eventually([&] { return zk.tree("/apps/locks").empty(); }, 5s))
      << describe(zk.tree("/apps"));
}

// Groups are [A-Za-z0-9._-]{1,64}, so "." and ".." are groups: their node is the
// escaped "%2E" and "%2E%2E" (ZooKeeper refuses them as path segments), and each is a
// group of its own, with a listing of its own.
TEST(ZkNames, TheGroupsDotAndDotDotAreGroupsOfTheirOwn) {
  ZooKeeperEnsemble zk;
  Client a = Client::open(zk.uri());
  Client b = Client::open(zk.uri());
  std::vector<Lease> held;
  for (const char* group : {".", "..", "..."}) {
    held.push_back(a.lock(group, "n").acquire(Mode::exclusive, Wait::none()));
    ASSERT_TRUE(held.back()) << "group '" << group << "'";
    EXPECT_FALSE(b.lock(group, "n").acquire(Mode::exclusive, Wait::none()))
        << "group '" << group << "' granted twice";
    const auto listed = b.list(group);
    ASSERT_EQ(listed.size(), 1u) << "group '" << group << "'";
    EXPECT_EQ(listed[0].name, "n");
    EXPECT_EQ(b.inspect(group, "n").holders.size(), 1u) << "group '" << group << "'";
  }
  held.clear();
  EXPECT_TRUE(empty_prefix(zk)) << "left:" << describe(warden_tree(zk));
}

}  // namespace
}  // namespace warden::testing
