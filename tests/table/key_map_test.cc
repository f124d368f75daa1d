// KeyMap against std::unordered_map: the same random inserts and erases of keys of every
// length leave both with the same keys and values; nodes keep their address until erased.
#include "table/key_map.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>

namespace warden::table {
namespace {

struct Value {
  std::uint64_t a = 0;
  std::uint32_t b = 0;
};

TEST(KeyMapTest, AKeysBytesAreKeptWithItsNodeAndFoundAgain) {
  KeyMap<Value> map;
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.find("g/x"), nullptr);
  const std::string keys[] = {"", "g/x", "bench-mem/0000000000000001", std::string(300, 'k'),
                              std::string("nul\0byte", 8)};
  for (const std::string& key : keys) {
    auto [node, made] = map.try_emplace(key);
    ASSERT_TRUE(made) << key;
    EXPECT_EQ(node->key(), key);
    EXPECT_EQ(node->value.a, 0u) << "value-initialised";
    node->value.a = key.size() + 1;
    EXPECT_EQ(map.try_emplace(key).first, node) << "the same node, not a second one";
    EXPECT_FALSE(map.try_emplace(key).second);
  }
  EXPECT_EQ(map.size(), 5u);
  EXPECT_EQ(map.find(std::string(300, 'k'))->value.a, 301u);
  EXPECT_EQ(map.find(std::string("nul\0byte", 8))->value.a, 9u);
  EXPECT_EQ(map.find("nul"), nullptr);
  map.erase(map.find("g/x"));
  EXPECT_EQ(map.find("g/x"), nullptr);
  EXPECT_EQ(map.size(), 4u);
}

TEST(KeyMapTest, RandomInsertsAndErasesMatchStdUnorderedMap) {
  std::mt19937_64 random(26112026);
  KeyMap<Value> ours;
  std::unordered_map<std::string, std::pair<Value, const KeyMap<Value>::Node*>> theirs;
  for (int step = 0; step < 100000; ++step) {
    // Few enough distinct keys that erases and re-inserts of one key are common, and
    // enough that the bucket array grows through several rehashes.
    const std::string key = "k" + std::string(random() % 40, 'x') + std::to_string(random() % 3000);
    if (random() % 3 != 0) {
      auto [node, made] = ours.try_emplace(key);
      ASSERT_EQ(made, !theirs.contains(key)) << key;
      if (made) {
        node->value = Value{static_cast<std::uint64_t>(step), 7};
        theirs[key] = {node->value, node};
      } else {
        ASSERT_EQ(node, theirs[key].second) << "a node moved: " << key;
      }
    } else if (KeyMap<Value>::Node* node = ours.find(key)) {
      ASSERT_TRUE(theirs.contains(key)) << key;
      ours.erase(node);
      theirs.erase(key);
    } else {
      ASSERT_FALSE(theirs.contains(key)) << key;
    }
  }
  ASSERT_EQ(ours.size(), theirs.size());
  std::size_t seen = 0;
  ours.for_each([&](const KeyMap<Value>::Node& node) {
    ++seen;
    const auto it = theirs.find(std::string(node.key()));
    ASSERT_NE(it, theirs.end()) << node.key();
    EXPECT_EQ(node.value.a, it->second.first.a);
    EXPECT_EQ(&node, it->second.second);
  });
  EXPECT_EQ(seen, theirs.size());
}

}  // namespace
}  // namespace warden::table
