// tests/table/lock_table_list_test.cc — LockTable::list: one page of a prefix listing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "table/lock_table.h"
#include "table_test_util.h"

namespace warden::table {
namespace {

using testing::at;
using testing::LockTableTest;
using testing::R;

std::vector<std::string> keys_of(const std::vector<KeySummary>& page) {
  std::vector<std::string> out;
  for (const auto& k : page) out.push_back(k.key);
  return out;
}

TEST_F(LockTableTest, ListShowsOnlyKeysWithThePrefixInOrderWithCounts) {
  grant(R::exclusive("g/b"));
  queue(R::shared("g/b"));
  queue(R::exclusive("g/b"));
  grant(R::shared("g/a"));
  grant(R::shared("g/a"));
  grant(R::exclusive("other/a"));
  grant(R::exclusive("g2/a"));
  const auto page = table_.list("g/", "", 10);
  ASSERT_EQ(keys_of(page), (std::vector<std::string>{"g/a", "g/b"}));
  EXPECT_EQ(page[0].holders, 2u);
  EXPECT_EQ(page[0].waiters, 0u);
  EXPECT_EQ(page[1].holders, 1u);
  EXPECT_EQ(page[1].waiters, 2u);
}

TEST_F(LockTableTest, ListPagesStartAfterTheCursorAndHoldAtMostTheLimit) {
  for (const char* name : {"g/e", "g/a", "g/d", "g/c", "g/b"}) grant(R::exclusive(name));
  EXPECT_EQ(keys_of(table_.list("g/", "", 2)), (std::vector<std::string>{"g/a", "g/b"}));
  EXPECT_EQ(keys_of(table_.list("g/", "g/b", 2)), (std::vector<std::string>{"g/c", "g/d"}));
  EXPECT_EQ(keys_of(table_.list("g/", "g/d", 2)), (std::vector<std::string>{"g/e"}));
  EXPECT_TRUE(table_.list("g/", "g/e", 2).empty());
  EXPECT_TRUE(table_.list("g/", "", 0).empty());
}

TEST_F(LockTableTest, ListForgetsReleasedKeysButKeepsDelayedOnes) {
  Grant a = grant(R::exclusive("g/a").ttl(100).lock_delay(500));
  Grant b = grant(R::exclusive("g/b"));
  ASSERT_TRUE(table_.release("g/b", b.token, at(1)));
  table_.advance(at(100));  // a expires: its lock-delay keeps the key
  const auto page = table_.list("g/", "", 10);
  ASSERT_EQ(keys_of(page), (std::vector<std::string>{"g/a"}));
  EXPECT_EQ(page[0].holders, 0u);
  (void)a;
  table_.advance(at(600));
  EXPECT_TRUE(table_.list("g/", "", 10).empty());
}

TEST_F(LockTableTest, ListDoesNotChangeTheTable) {
  grant(R::exclusive("g/a").ttl(100));
  table_.list("g/", "", 10);
  EXPECT_EQ(table_.stats().keys, 1u);
  EXPECT_TRUE(table_.take_events().empty());
}

}  // namespace
}  // namespace warden::table
