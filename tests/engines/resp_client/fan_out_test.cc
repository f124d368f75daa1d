// resp_client::fan_out against real redis-servers: one round to several servers at once,
// where a frozen or dead server fails its own leg, within the deadline, and never
// spoils a later round with a late reply.
#include "engines/resp_client/fan_out.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engines/resp_client/connector.h"
#include "engines/resp_client/pool.h"
#include "support/redis_server.h"
#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

using namespace std::chrono_literals;

RetryPolicy quick_retry() {
  RetryPolicy retry;
  retry.initial = 1ms;
  retry.max = 5ms;
  return retry;
}

struct Server {
  testing::RedisServer redis;
  std::shared_ptr<Connector> connector;
  std::unique_ptr<Pool> pool;

  // `retry`: the back-off for which a server that failed is skipped.
  explicit Server(RetryPolicy retry = quick_retry()) {
    ConnectOptions options;
    options.host = "127.0.0.1";
    options.port = redis.port();
    options.timeout = 200ms;
    connector = std::make_shared<Connector>(options, retry);
    pool = std::make_unique<Pool>(connector, 4);
  }
};

std::vector<Leg> legs_for(std::vector<std::unique_ptr<Server>>& servers,
                          const std::vector<Command>& commands) {
  std::vector<Leg> legs(servers.size());
  for (std::size_t i = 0; i < servers.size(); ++i) {
    legs[i].pool = servers[i]->pool.get();
    legs[i].commands = commands;
  }
  return legs;
}

std::vector<std::unique_ptr<Server>> start(int n, RetryPolicy retry = quick_retry()) {
  std::vector<std::unique_ptr<Server>> servers;
  for (int i = 0; i < n; ++i) servers.push_back(std::make_unique<Server>(retry));
  return servers;
}

TEST(FanOut, EveryServerAnswersItsOwnCommandsInOrder) {
  auto servers = start(3);
  auto legs = legs_for(servers, {{"SET", "k", "v"}, {"GET", "k"}, {"INCR", "n"}});
  fan_out(legs, Clock::now() + 2s);
  for (const Leg& leg : legs) {
    ASSERT_TRUE(leg.ok()) << (leg.error ? leg.error->what() : "missing replies");
    EXPECT_EQ(leg.replies[1].text, "v");
    EXPECT_EQ(leg.replies[2].integer, 1);
  }
}

TEST(FanOut, AFrozenServerFailsItsLegByTheDeadlineAndTheOthersStillAnswer) {
  // A failed server is skipped for 3 s: long enough that the round "right away" below
  // comes within it however loaded the machine, short enough to wait out.
  RetryPolicy retry;
  retry.kind = RetryPolicy::Kind::constant;
  retry.initial = retry.max = 3s;
  retry.jitter = 0;
  auto servers = start(3, retry);
  servers[1]->redis.pause();
  auto legs = legs_for(servers, {{"INCR", "n"}});
  const auto begin = Clock::now();
  fan_out(legs, begin + 150ms);
  const auto took = Clock::now() - begin;
  servers[1]->redis.resume();

  EXPECT_TRUE(legs[0].ok());
  EXPECT_TRUE(legs[2].ok());
  ASSERT_TRUE(legs[1].error);
  EXPECT_EQ(legs[1].error->code(), Errc::deadline_exceeded);
  EXPECT_GE(took, 150ms) << "the round ended before its deadline";

  // The silent server is suspect for a moment: a round right away skips it at once.
  auto skipped = legs_for(servers, {{"PING"}});
  fan_out(skipped, Clock::now() + 2s);
  ASSERT_TRUE(skipped[1].error);
  EXPECT_NE(std::string(skipped[1].error->what()).find("next attempt in"), std::string::npos);

  // After its back-off, the frozen server's late reply (an integer) must not answer the
  // next round's GET of a missing key: its connection was dropped, not handed back to
  // the pool.
  std::this_thread::sleep_for(retry.max + 100ms);
  auto again = legs_for(servers, {{"GET", "missing"}});
  fan_out(again, Clock::now() + 2s);
  for (const Leg& leg : again) {
    ASSERT_TRUE(leg.ok()) << leg.error->what();
    EXPECT_TRUE(leg.replies[0].is_nil()) << leg.replies[0].describe();
  }
}

TEST(FanOut, ADeadServerFailsItsLegAsUnavailableAtOnce) {
  auto servers = start(3);
  servers[2]->redis.kill9();
  auto legs = legs_for(servers, {{"PING"}});
  // A refused connection is an answer: the round does not wait out its deadline (far
  // longer than any slowness of a sanitizer build) for the dead server.
  constexpr auto kDeadline = 30s;
  const auto begin = Clock::now();
  fan_out(legs, begin + kDeadline);
  EXPECT_LT(Clock::now() - begin, kDeadline) << "the round waited for a dead server";
  EXPECT_TRUE(legs[0].ok());
  EXPECT_TRUE(legs[1].ok());
  ASSERT_TRUE(legs[2].error);
  EXPECT_EQ(legs[2].error->code(), Errc::unavailable);
}

TEST(FanOut, ErrorRepliesAreRepliesNotFailures) {
  auto servers = start(2);
  auto legs = legs_for(servers, {{"NOSUCHCOMMAND"}, {"PING"}});
  fan_out(legs, Clock::now() + 2s);
  for (const Leg& leg : legs) {
    ASSERT_TRUE(leg.ok());
    EXPECT_TRUE(leg.replies[0].is_error());
    EXPECT_EQ(leg.replies[1].text, "PONG");
  }
}

TEST(FanOut, LegsWithoutCommandsAreSkipped) {
  auto servers = start(2);
  servers[0]->redis.kill9();
  auto legs = legs_for(servers, {{"PING"}});
  legs[0].commands.clear();
  fan_out(legs, Clock::now() + 2s);
  EXPECT_TRUE(legs[0].ok());
  EXPECT_TRUE(legs[0].replies.empty());
  EXPECT_TRUE(legs[1].ok());
}

TEST(FanOut, ARoundDecidedWithoutAFrozenServerEndsAfterAShortGrace) {
  auto servers = start(3);
  servers[2]->redis.pause();
  auto legs = legs_for(servers, {{"PING"}});
  const auto two_answered = [](std::span<const Leg> so_far) {
    int answered = 0;
    for (const Leg& leg : so_far) answered += leg.ok() ? 1 : 0;
    return answered >= 2;
  };
  // The grace is a quarter of the round's bound here (2 s), not the whole 8 s.
  constexpr auto kBound = 8s;
  const auto begin = Clock::now();
  fan_out(legs, begin + kBound, two_answered);
  const auto took = Clock::now() - begin;
  servers[2]->redis.resume();
  EXPECT_LT(took, kBound) << "waited out the round's bound for the frozen server";
  EXPECT_TRUE(legs[0].ok());
  EXPECT_TRUE(legs[1].ok());
  ASSERT_TRUE(legs[2].error);
  EXPECT_EQ(legs[2].error->code(), Errc::deadline_exceeded);
  EXPECT_NE(std::string(legs[2].error->what()).find("not waited for"), std::string::npos);
}

TEST(FanOut, HealthyServersAnswerWithinTheGraceAndKeepTheirConnections) {
  auto servers = start(3);
  const auto first_answer = [](std::span<const Leg> so_far) {
    for (const Leg& leg : so_far) {
      if (leg.ok()) return true;
    }
    return false;
  };
  for (int round = 0; round < 20; ++round) {
    auto legs = legs_for(servers, {{"PING"}});
    fan_out(legs, Clock::now() + 2s, first_answer);
    int answered = 0;
    for (const Leg& leg : legs) answered += leg.ok() ? 1 : 0;
    EXPECT_GE(answered, 1);
  }
  // Connections closed because a reply came late would show as more than one per
  // server ever opened; the pools kept theirs.
  for (const auto& server : servers) EXPECT_LE(server->pool->open_count(), 2u);
}

}  // namespace
}  // namespace warden::engines::resp_client
