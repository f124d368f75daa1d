// resp_client::Pipeline's posted batches against a real redis-server: answered in the
// order written, completed by a later round, by settle(), by the drainer when nothing
// else is sent, and failed (never lost) when the server goes away.
#include "engines/resp_client/pipeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engines/resp_client/connector.h"
#include "support/redis_server.h"
#include "support/waiting.h"
#include "warden/error.h"

namespace warden::engines::resp_client {
namespace {

using namespace std::chrono_literals;

// An integer reply as its number, any other as its text.
std::string text_of(const Reply& reply) {
  return reply.is_integer() ? std::to_string(reply.integer) : reply.text;
}

// What the completions of posted batches saw, in the order they ran.
struct Completions {
  std::mutex mu;
  std::vector<std::string> seen;  // the first reply as text, or "error: ..."

  Completion record() {
    return [this](RoundResult& result, std::exception_ptr error) {
      std::string what;
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const Error& e) {
          what = "error: " + std::string(to_string(e.code()));
        }
      } else {
        what = text_of(result.replies.at(0));
      }
      std::lock_guard lock(mu);
      seen.push_back(what);
    };
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mu);
    return seen;
  }
};

struct Fixture {
  testing::RedisServer redis;
  std::shared_ptr<Connector> connector;

  explicit Fixture(std::chrono::milliseconds timeout = 2'000ms) {
    ConnectOptions options;
    options.host = "127.0.0.1";
    options.port = redis.port();
    options.timeout = timeout;
    RetryPolicy retry;
    retry.initial = 1ms;
    retry.max = 5ms;
    connector = std::make_shared<Connector>(options, retry);
  }
};

TEST(Pipeline, PostedBatchesAreAnsweredInOrderBeforeALaterRun) {
  Fixture f;
  Pipeline pipeline(f.connector, 2'000ms);
  Completions done;
  for (int i = 0; i < 3; ++i) pipeline.post({{"INCR", "n"}}, done.record());
  const auto result = pipeline.run({{"GET", "n"}});
EXPECT_EQ(text_of(result.replies.at(0)), "3") << "the run overtook the posts";
  EXPECT_EQ(done.snapshot(), (std::vector<std::string>{"1", "2", "3"}))
      << "a run must complete every post written before it";
}

TEST(Pipeline, TheDrainerCompletesAPostWhenNothingElseIsSent) {
  Fixture f;
  Pipeline pipeline(f.connector, 2'000ms);
  Completions done;
  pipeline.post({{"PING"}}, done.record());
  EXPECT_TRUE(testing::eventually([&] { return done.snapshot().size() == 1; }));
  EXPECT_EQ(done.snapshot(), std::vector<std::string>{"PONG"});
}

TEST(Pipeline, SettleCompletesEveryPostFromManyThreads) {
  Fixture f;
  Pipeline pipeline(f.connector, 2'000ms);
  Completions done;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) pipeline.post({{"INCR", "n"}}, done.record());
    });
  }
  for (auto& thread : threads) thread.join();
  pipeline.settle();
  const auto seen = done.snapshot();
  ASSERT_EQ(seen.size(), 400u);
  // Every INCR answered once, in the order the server ran them.
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], std::to_string(i + 1));
}

TEST(Pipeline, ACompletionMayPostAgainOnItsOwnPipeline) {
  Fixture f;
  Pipeline pipeline(f.connector, 2'000ms);
  Completions done;
  pipeline.post({{"INCR", "n"}}, [&](RoundResult& result, std::exception_ptr error) {
    done.record()(result, error);
    pipeline.post({{"INCR", "n"}}, done.record());  // as redis:// sends a lost script again
  });
  pipeline.settle();
  EXPECT_EQ(done.snapshot(), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(text_of(pipeline.run({{"GET", "n"}}).replies.at(0)), "2");
}

TEST(Pipeline, ADestroyedPipelineCompletesItsPostsFirst) {
  Fixture f;
  Completions done;
  {
    Pipeline pipeline(f.connector, 2'000ms);
    for (int i = 0; i < 10; ++i) pipeline.post({{"INCR", "n"}}, done.record());
  }
  EXPECT_EQ(done.snapshot().size(), 10u);
}

TEST(Pipeline, AFrozenServerFailsThePostsOwedAndTheNextRoundReconnects) {
  Fixture f(300ms);
  Pipeline pipeline(f.connector, 300ms);
  Completions done;
  pipeline.run({{"PING"}});  // connected
  f.redis.pause();
  pipeline.post({{"INCR", "n"}}, done.record());
  pipeline.post({{"INCR", "n"}}, done.record());
  EXPECT_TRUE(testing::eventually([&] { return done.snapshot().size() == 2; }))
      << "posts owed by a frozen server were never completed";
  for (const auto& seen : done.snapshot()) EXPECT_EQ(seen, "error: deadline_exceeded");
  f.redis.resume();
  // The connection was dropped with the posts' replies still due: the next round is
  // answered on a new one, not by a late reply to the posts.
  EXPECT_TRUE(testing::eventually([&] {
    try {
      return text_of(pipeline.run({{"PING"}}).replies.at(0)) == "PONG";
    } catch (const Error&) {
      return false;
    }
  }));
}

// Two callers on a frozen server: the second, queued behind the first's round, is not
// given a round of its own (a new connection and another timeout) once the first went
// unanswered: it fails with it, within the timeout of its own call.
TEST(Pipeline, ARunQueuedBehindAnUnansweredRoundFailsWithIt) {
  constexpr auto kTimeout = 1'000ms;
  Fixture f(kTimeout);
  Pipeline pipeline(f.connector, kTimeout);
  pipeline.run({{"PING"}});  // connected
  f.redis.pause();
  std::thread first([&] { EXPECT_THROW(pipeline.run({{"PING"}}), Error); });
  std::this_thread::sleep_for(kTimeout / 2);  // the first round is under way
  const auto called = Clock::now();
  try {
    pipeline.run({{"PING"}});
    ADD_FAILURE() << "a frozen server answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::deadline_exceeded) << e.what();
  }
  const auto took = Clock::now() - called;
  first.join();
  f.redis.resume();
  // A round of its own would have begun at the first's timeout and waited a whole
  // timeout more: 1.5 timeouts after this call. Failing with the first ends at half of one.
  EXPECT_LT(took, kTimeout + kTimeout / 4)
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms: the run waited for a round of its own after the one before went unanswered";
  EXPECT_TRUE(testing::eventually([&] {
    try {
      return text_of(pipeline.run({{"PING"}}).replies.at(0)) == "PONG";
    } catch (const Error&) {
      return false;
    }
  })) << "the pipeline did not recover once the server ran again";
}

TEST(Pipeline, ARunAfterARestartWithPostsOwedGoesOutOnANewConnection) {
  Fixture f;
  Pipeline pipeline(f.connector, 2'000ms);
  Completions done;
  pipeline.run({{"PING"}});  // connected
  f.redis.pause();
  pipeline.post({{"INCR", "n"}}, done.record());
  f.redis.kill9();
  f.redis.start();
  // The run is answered by the new server; the post is failed with its server, unless
  // that server answered it just before SIGSTOP took hold.
  EXPECT_EQ(text_of(pipeline.run({{"PING"}}).replies.at(0)), "PONG");
  const auto seen = done.snapshot();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0] == "error: unavailable" || seen[0] == "1") << seen[0];
}

TEST(Pipeline, AServerThatIsGoneFailsAPostBeforeItReturns) {
  Fixture f(300ms);
  Pipeline pipeline(f.connector, 300ms);
  Completions done;
  f.redis.kill9();
  pipeline.post({{"PING"}}, done.record());
  const auto seen = done.snapshot();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "error: unavailable");
}

}  // namespace
}  // namespace warden::engines::resp_client
