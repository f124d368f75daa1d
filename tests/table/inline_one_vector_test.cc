// InlineOneVector against std::vector: the same random inserts, erases, push_backs,
// copies, moves and shrinks leave both with the same elements, and a lone element lives
// inline (no heap) until a second one comes.
#include "table/inline_one_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace warden::table {
namespace {

struct Item {
  std::uint64_t id;
  std::uint32_t a;
  std::uint8_t b;
};

bool same(const InlineOneVector<Item>& ours, const std::vector<Item>& theirs) {
  if (ours.size() != theirs.size()) return false;
  for (std::size_t i = 0; i < theirs.size(); ++i) {
    if (ours[i].id != theirs[i].id || ours[i].a != theirs[i].a || ours[i].b != theirs[i].b) {
      return false;
    }
  }
  return true;
}

bool stored_inline(const InlineOneVector<Item>& v) {
  const auto* self = reinterpret_cast<const unsigned char*>(&v);
  const auto* data = reinterpret_cast<const unsigned char*>(v.data());
  return data >= self && data < self + sizeof v;
}

TEST(InlineOneVectorTest, OneElementStaysInlineAndASecondMovesThemToTheHeap) {
  InlineOneVector<Item> v;
  EXPECT_TRUE(v.empty());
  v.push_back({1, 2, 3});
  EXPECT_TRUE(stored_inline(v));
  EXPECT_EQ(v.capacity(), 1u);
  v.insert(v.begin(), {0, 0, 0});
  EXPECT_FALSE(stored_inline(v));
  EXPECT_EQ(v[0].id, 0u);
  EXPECT_EQ(v[1].id, 1u);
  v.erase(v.begin());
  EXPECT_EQ(v.size(), 1u);
  EXPECT_FALSE(stored_inline(v)) << "erase keeps the heap room, like std::vector";
  v.shrink_to_fit();
  EXPECT_TRUE(stored_inline(v));
  EXPECT_EQ(v[0].id, 1u);
  EXPECT_EQ(v[0].a, 2u);
}

TEST(InlineOneVectorTest, RandomOperationsMatchStdVector) {
  std::mt19937_64 random(20261126);
  InlineOneVector<Item> ours;
  std::vector<Item> theirs;
  std::uint64_t next = 1;
  for (int step = 0; step < 200000; ++step) {
    const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(random() % n); };
    switch (pick(8)) {
      case 0:
      case 1: {  // insert anywhere, an element of its own sometimes
        const std::size_t at = pick(theirs.size() + 1);
        const Item item = theirs.empty() || pick(4) != 0
                              ? Item{next++, static_cast<std::uint32_t>(step), 7}
                              : ours[pick(ours.size())];
        ours.insert(ours.begin() + at, item);
        theirs.insert(theirs.begin() + static_cast<std::ptrdiff_t>(at), item);
        break;
      }
      case 2:
        ours.push_back({next, 1, 2});
        theirs.push_back({next++, 1, 2});
        break;
      case 3:
      case 4:
        if (!theirs.empty()) {
          const std::size_t at = pick(theirs.size());
          ours.erase(ours.begin() + at);
          theirs.erase(theirs.begin() + static_cast<std::ptrdiff_t>(at));
        }
        break;
      case 5:
        if (!theirs.empty()) {
          const std::size_t from = pick(theirs.size());
          const std::size_t to = from + pick(theirs.size() - from + 1);
          ours.erase(ours.begin() + from, ours.begin() + to);
          theirs.erase(theirs.begin() + static_cast<std::ptrdiff_t>(from),
                       theirs.begin() + static_cast<std::ptrdiff_t>(to));
        }
        break;
      case 6:
        ours.shrink_to_fit();
        EXPECT_EQ(stored_inline(ours), ours.size() <= 1);
        break;
      case 7: {  // a copy and a move each carry the same elements
        InlineOneVector<Item> copy = ours;
        ASSERT_TRUE(same(copy, theirs));
        InlineOneVector<Item> moved = std::move(copy);
        ASSERT_TRUE(same(moved, theirs));
        ours = std::move(moved);
        break;
      }
    }
    if (theirs.size() > 40) {  // keep it short enough that every branch is taken often
      ours.erase(ours.begin() + 20, ours.end());
      theirs.erase(theirs.begin() + 20, theirs.end());
    }
    ASSERT_TRUE(same(ours, theirs)) << "diverged at step " << step;
  }
}

}  // namespace
}  // namespace warden::table
