// tests/server/dispatcher_waits_test.cc — tagged waits at wardend's dispatcher, with fake
// time and no sockets: WAITS, ACQUIRE ... TAG t answered [t, reply] when it resolves (in
// any order), WITHDRAW t, and what closing or half-closing such a connection does.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dispatcher_test_support.h"
#include "server/dispatcher.h"

namespace warden::server {
namespace {

using std::chrono::milliseconds;
using Outcome = Dispatcher::Outcome;

// [tag, inner] as the server writes it.
std::string tagged(std::string_view tag, std::string_view inner) {
  return "*2\r\n$" + std::to_string(tag.size()) + "\r\n" + std::string(tag) + "\r\n" +
         std::string(inner);
}
// The tag of a tagged answer and what it carries, a grant reduced to "granted".
std::pair<std::string, std::string> untag(const std::string& answer) {
  if (!answer.starts_with("*2\r\n$")) return {"", answer};
  const auto len_end = answer.find("\r\n", 5);
  const auto len = std::stoul(answer.substr(5, len_end - 5));
  const std::string tag = answer.substr(len_end + 2, len);
  std::string inner = answer.substr(len_end + 2 + len + 2);
  if (inner.starts_with("*3\r\n:")) inner = "granted";
  return {tag, inner};
}

class DispatcherWaitsTest : public ::testing::Test {
 protected:
  DispatcherWaitsTest() : d_(DispatcherConfig{{}, {}, "9.9.9", Time{}}, nullptr, nullptr) {
    for (ConnId c : {1, 2, 5}) EXPECT_TRUE(d_.connect(c));
    EXPECT_EQ(call(5, {"WAITS"}), kOk);
  }

  std::string call(ConnId conn, const std::vector<std::string>& args, Time now = at(0),
                   Outcome expected = Outcome::replied) {
    std::vector<std::string_view> views(args.begin(), args.end());
    std::string reply;
    EXPECT_EQ(d_.execute(conn, views, now, reply), expected) << args[0] << ": " << reply;
    return reply;
  }
  // A plain ACQUIRE on connection `conn`, granted at once: its token and secret.
  std::pair<std::string, std::string> hold(ConnId conn, const std::string& key) {
    const std::string reply = call(conn, {"ACQUIRE", key, "x", "60000"});
    EXPECT_TRUE(reply.starts_with("*3\r\n:")) << reply;
    const auto token = reply.substr(5, reply.find("\r\n", 5) - 5);
    return {token, reply.substr(reply.find("$32\r\n") + 5, 32)};
  }
  // Connection 5's answers resolved since the last call, untagged.
  std::vector<std::pair<std::string, std::string>> answers() {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& w : d_.take_wakeups()) {
      EXPECT_EQ(w.conn, 5u);
      out.push_back(untag(w.reply));
    }
    return out;
  }
  std::size_t waiters(const std::string& key) { return d_.table().inspect(key).waiters.size(); }

  Dispatcher d_;
};

TEST_F(DispatcherWaitsTest, EachTaggedRequestIsAnsweredWhenItResolvesInAnyOrder) {
  const auto a = hold(1, "g/a");
  const auto b = hold(1, "g/b");
  // Two waits on one connection, neither stopping the connection being read.
  EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "x", "60000", "WAIT", "5000", "TAG", "first"}), "");
  EXPECT_EQ(call(5, {"ACQUIRE", "g/b", "x", "60000", "WAIT", "5000", "TAG", "second"}), "");
  // A request granted at once is answered at once, tagged.
  EXPECT_EQ(untag(call(5, {"ACQUIRE", "g/c", "x", "60000", "TAG", "third"})),
            std::make_pair(std::string("third"), std::string("granted")));
  EXPECT_EQ(d_.stats().parked, 2u);
  EXPECT_TRUE(answers().empty());

  call(1, {"RELEASE", "g/b", b.first, b.second});
  EXPECT_EQ(answers(), (std::vector<std::pair<std::string, std::string>>{{"second", "granted"}}));
  call(1, {"RELEASE", "g/a", a.first, a.second});
  EXPECT_EQ(answers(), (std::vector<std::pair<std::string, std::string>>{{"first", "granted"}}));
  EXPECT_EQ(d_.stats().parked, 0u);
  // A tag may be used again once its request was answered.
  EXPECT_EQ(untag(call(5, {"ACQUIRE", "g/d", "x", "60000", "TAG", "first"})).second, "granted");
}

TEST_F(DispatcherWaitsTest, WithdrawAnswersNilOnceAndLeavesNoWaiter) {
  hold(1, "g/a");
  EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "x", "60000", "WAIT", "5000", "TAG", "t"}), "");
  EXPECT_EQ(waiters("g/a"), 1u);
  EXPECT_EQ(call(5, {"WITHDRAW", "t"}), tagged("t", kNil));
  EXPECT_EQ(waiters("g/a"), 0u);
  EXPECT_EQ(call(5, {"WITHDRAW", "t"}), "") << "answered already: nothing more to say";
  EXPECT_EQ(call(5, {"WITHDRAW", "never-asked"}), "");
  EXPECT_TRUE(answers().empty());
}

TEST_F(DispatcherWaitsTest, AWaitThatRunsOutIsAnsweredNil) {
  hold(1, "g/a");
  EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "x", "60000", "WAIT", "100", "TAG", "t"}), "");
  d_.advance(at(150));
  EXPECT_EQ(answers(), (std::vector<std::pair<std::string, std::string>>{{"t", kNil}}));
  EXPECT_EQ(waiters("g/a"), 0u);
}

TEST_F(DispatcherWaitsTest, ABadRequestIsRefusedUnderItsTagAndTheConnectionGoesOn) {
  EXPECT_EQ(call(5, {"ACQUIRE", "nogroup", "x", "60000", "TAG", "t"}).substr(0, 17),
            tagged("t", "-INVALID").substr(0, 17));
  hold(1, "g/a");
  EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "x", "60000", "WAIT", "5000", "TAG", "t"}), "");
  EXPECT_EQ(call(5, {"ACQUIRE", "g/b", "x", "60000", "WAIT", "5000", "TAG", "t"}),
            tagged("t", "-INVALID tag 't' already names a waiting request here\r\n"));
  EXPECT_EQ(waiters("g/b"), 0u);
  EXPECT_EQ(call(5, {"PING"}), "+PONG\r\n");
}

TEST_F(DispatcherWaitsTest, ARequestWithoutATagClosesTheConnection) {
  const std::string refused =
      "-ERR a waits connection takes only ACQUIRE ... TAG t, WITHDRAW t, PING and QUIT "
      "(t: 1..64 bytes, last)\r\n";
  EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "x", "60000"}, at(0), Outcome::close), refused);
  EXPECT_EQ(call(5, {"INSPECT", "g/a"}, at(0), Outcome::close), refused);
  EXPECT_EQ(call(5, {"AUTH", "secret"}, at(0), Outcome::close), refused);
  EXPECT_EQ(
      call(5, {"ACQUIRE", "g/a", "x", "60000", "TAG", std::string(65, 't')}, at(0), Outcome::close),
      refused);
  EXPECT_EQ(d_.table().stats().keys, 0u) << "nothing was asked";
}

TEST_F(DispatcherWaitsTest, ClosingTheConnectionDropsEveryWaitAndGrantsNothingToIt) {
  const auto a = hold(1, "g/a");
  for (const std::string tag : {"1", "2", "3"}) {
    EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "s", "60000", "WAIT", "5000", "TAG", tag}), "");
  }
  EXPECT_EQ(waiters("g/a"), 3u);
  d_.disconnect(5, at(10));
  EXPECT_EQ(waiters("g/a"), 0u);
  call(1, {"RELEASE", "g/a", a.first, a.second}, at(20));
  EXPECT_TRUE(d_.table().inspect("g/a").holders.empty());
  EXPECT_TRUE(d_.take_wakeups().empty());
}

// The holder's lease runs out at 100 ms; nothing applies the time until the waiting
// connection closes at 200 ms, and applying it grants that connection's wait then. The
// grant nobody will read is given back, and nothing is told to the gone connection.
TEST_F(DispatcherWaitsTest, AGrantMadeWhileItsConnectionClosesIsGivenBack) {
  EXPECT_TRUE(call(1, {"ACQUIRE", "g/a", "x", "100"}).starts_with("*3\r\n:"));
  EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "x", "60000", "FOREVER", "TAG", "t"}), "");
  d_.disconnect(5, at(200));
  EXPECT_TRUE(d_.take_wakeups().empty());
  const auto info = d_.table().inspect("g/a");
  EXPECT_TRUE(info.holders.empty());
  EXPECT_TRUE(info.waiters.empty());
  EXPECT_EQ(d_.stats().parked, 0u);
}

TEST_F(DispatcherWaitsTest, AHalfCloseAnswersEveryWaitNil) {
  hold(1, "g/a");
  EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "x", "60000", "WAIT", "5000", "TAG", "1"}), "");
  EXPECT_EQ(call(5, {"ACQUIRE", "g/a", "x", "60000", "FOREVER", "TAG", "2"}), "");
  d_.cancel_parked(5, at(10));
  auto got = answers();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::string>>{{"1", kNil}, {"2", kNil}}));
  EXPECT_EQ(waiters("g/a"), 0u);
}

TEST_F(DispatcherWaitsTest, HelloOffersTaggedWaitsFromProtocol8) {
  const std::string hello = call(2, {"HELLO"});
  EXPECT_NE(hello.find("$5\r\nproto\r\n:8\r\n"), std::string::npos) << hello;
  EXPECT_NE(hello.find(" waits"), std::string::npos) << hello;
}

}  // namespace
}  // namespace warden::server
