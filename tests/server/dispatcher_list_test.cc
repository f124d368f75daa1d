// tests/server/dispatcher_list_test.cc — wardend's LIST: a group's locks, page by page.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dispatcher_test_support.h"
#include "server/dispatcher.h"

namespace warden::server {
namespace {

using std::chrono::milliseconds;

// LIST's reply, built from its parts: [next_cursor, [[name, holders, waiters]...]].
struct Row {
  std::string name;
  int holders;
  int waiters;
};
std::string list_reply(std::string_view next, const std::vector<Row>& rows) {
  std::string out = "*2\r\n" + bulk(next) + "*" + std::to_string(rows.size()) + "\r\n";
  for (const auto& r : rows) {
    out += "*3\r\n" + bulk(r.name) + ":" + std::to_string(r.holders) +
           "\r\n:" + std::to_string(r.waiters) + "\r\n";
  }
  return out;
}

class DispatcherListTest : public ::testing::Test {
 protected:
  DispatcherListTest() : d_(DispatcherConfig{{}, {}, "9.9.9", Time{}}, nullptr, nullptr) {
    for (ConnId c : {1, 2, 3, 99}) EXPECT_TRUE(d_.connect(c));
  }

  Dispatcher::Outcome run(ConnId conn, const std::vector<std::string>& args, std::string& reply,
                          Time now = at(0)) {
    std::vector<std::string_view> views(args.begin(), args.end());
    return d_.execute(conn, views, now, reply);
  }
  std::string call(ConnId conn, const std::vector<std::string>& args, Time now = at(0)) {
    std::string reply;
    EXPECT_EQ(run(conn, args, reply, now), Dispatcher::Outcome::replied) << reply;
    return reply;
  }
  void park(ConnId conn, const std::vector<std::string>& args) {
    std::string reply;
    EXPECT_EQ(run(conn, args, reply), Dispatcher::Outcome::parked) << reply;
  }

  Dispatcher d_;
};

TEST_F(DispatcherListTest, ListsTheGroupsLocksInOrderWithHolderAndWaiterCounts) {
  call(1, {"ACQUIRE", "g/b", "x", "1000"});
  park(2, {"ACQUIRE", "g/b", "s", "1000", "FOREVER"});
  park(3, {"ACQUIRE", "g/b", "x", "1000", "FOREVER"});
  call(99, {"ACQUIRE", "g/a", "s", "1000"});
  call(99, {"ACQUIRE", "g/a", "s", "1000"});
  call(99, {"ACQUIRE", "other/c", "x", "1000"});
  EXPECT_EQ(call(99, {"LIST", "g"}), list_reply("", {{"a", 2, 0}, {"b", 1, 2}}));
  EXPECT_EQ(call(99, {"list", "other"}), list_reply("", {{"c", 1, 0}}));
  EXPECT_EQ(call(99, {"LIST", "empty"}), list_reply("", {}));
}

TEST_F(DispatcherListTest, PagesEndWithTheLastNameAsCursorUntilAShortPage) {
  for (const char* name : {"e", "a", "d", "c", "b"}) {
    call(99, {"ACQUIRE", std::string("g/") + name, "x", "1000"});
  }
  EXPECT_EQ(call(99, {"LIST", "g", "", "COUNT", "2"}), list_reply("b", {{"a", 1, 0}, {"b", 1, 0}}));
  EXPECT_EQ(call(99, {"LIST", "g", "b", "COUNT", "2"}),
            list_reply("d", {{"c", 1, 0}, {"d", 1, 0}}));
  EXPECT_EQ(call(99, {"LIST", "g", "d", "COUNT", "2"}), list_reply("", {{"e", 1, 0}}));
  EXPECT_EQ(call(99, {"LIST", "g", "d"}), list_reply("", {{"e", 1, 0}}));
}

TEST_F(DispatcherListTest, APageHoldsAtMostAThousandNames) {
  for (int i = 0; i < 1001; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "%04d", i);
    call(99, {"ACQUIRE", std::string("g/") + name, "x", "60000"});
  }
  const std::string first = call(99, {"LIST", "g"});
  EXPECT_TRUE(first.starts_with("*2\r\n" + bulk("0999") + "*1000\r\n")) << first.substr(0, 40);
  EXPECT_EQ(call(99, {"LIST", "g", "0999"}), list_reply("", {{"1000", 1, 0}}));
}

TEST_F(DispatcherListTest, ExpiredLeasesAreGoneFromTheListing) {
  call(1, {"ACQUIRE", "g/a", "x", "100"});
  call(1, {"ACQUIRE", "g/b", "x", "1000"});
  EXPECT_EQ(call(99, {"LIST", "g"}, at(200)), list_reply("", {{"b", 1, 0}}));
}

TEST_F(DispatcherListTest, BadInputGetsAnErrorAndChangesNothing) {
  call(1, {"ACQUIRE", "g/a", "x", "1000"});
  EXPECT_TRUE(call(99, {"LIST"}).starts_with("-ERR wrong number of arguments"));
  EXPECT_TRUE(call(99, {"LIST", "bad/group"}).starts_with("-INVALID"));
  EXPECT_TRUE(call(99, {"LIST", ""}).starts_with("-INVALID"));
  EXPECT_TRUE(call(99, {"LIST", "g", "", "COUNT", "0"}).starts_with("-INVALID"));
  EXPECT_TRUE(call(99, {"LIST", "g", "", "COUNT", "1001"}).starts_with("-INVALID"));
  EXPECT_TRUE(call(99, {"LIST", "g", "", "COUNT", "x"}).starts_with("-INVALID"));
  EXPECT_TRUE(call(99, {"LIST", "g", "", "LIMIT", "2"}).starts_with("-ERR syntax error"));
  EXPECT_TRUE(call(99, {"LIST", "g", std::string(513, 'n')}).starts_with("-INVALID cursor"));
  EXPECT_EQ(call(99, {"LIST", "g"}), list_reply("", {{"a", 1, 0}}));
}

}  // namespace
}  // namespace warden::server
