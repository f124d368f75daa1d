// warden://: a cancelled or timed-out wait leaves no trace on the server — checked on
// the server itself (INSPECT), also when a grant races the cancellation.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>

#include <future>
#include <memory>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "support/server_process.h"
#include "support/waiting.h"
#include "support/wardend_probe.h"
#include "warden/client.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/multi_lock.h"

namespace warden::testing {
namespace {

TEST(WardenCancellation, CancelledParkedWaitLeavesNoWaiterOnTheServer) {
  Wardend server;
  const WardendProbe probe(server.port());
  Client holder = Client::open(server.uri());
  Client waiter = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.lock("g", "x").acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  });
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == 1; }));

  stop.request_stop();
  ASSERT_EQ(waiting.wait_for(kPrompt), std::future_status::ready);
  EXPECT_FALSE(waiting.get());
  // The engine returned only after the server confirmed: the waiter is gone already.
  const auto state = probe.inspect("g/x");
  EXPECT_EQ(state.waiters, 0u);
  EXPECT_EQ(state.holder_tokens, std::vector<std::uint64_t>{held.token()});
}

TEST(WardenCancellation, TimedOutWaitLeavesNoWaiterOnTheServer) {
  Wardend server;
  const WardendProbe probe(server.port());
  Client holder = Client::open(server.uri());
  Client waiter = Client::open(server.uri());
  Lease held = holder.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::up_to(200ms)));
  EXPECT_EQ(probe.inspect("g/x").waiters, 0u);
  // The connection that waited is fit for the next request.
  EXPECT_FALSE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  held.release();
  EXPECT_TRUE(waiter.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
}

// A raw connection that sends a request without waiting for the answer.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port)
      : c_(redisConnectWithTimeout("127.0.0.1", port, timeval{5, 0})) {
    if (c_ == nullptr || c_->err != 0) throw std::runtime_error("cannot connect");
  }
  ~RawConnection() { redisFree(c_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  void send(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.c_str());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(c_, static_cast<int>(args.size()), argv.data(), lens.data());
    int done = 0;
    while (done == 0) redisBufferWrite(c_, &done);
  }
  // Reads an ACQUIRE's grant reply: its token and owner secret.
  std::pair<std::uint64_t, std::string> read_grant() {
    void* raw = nullptr;
    if (redisGetReply(c_, &raw) != REDIS_OK) throw std::runtime_error("no ACQUIRE reply");
    const auto* r = static_cast<redisReply*>(raw);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
      freeReplyObject(raw);
      throw std::runtime_error("ACQUIRE was not granted");
    }
    std::pair<std::uint64_t, std::string> out{static_cast<std::uint64_t>(r->element[0]->integer),
                                              std::string(r->element[2]->str, r->element[2]->len)};
    freeReplyObject(raw);
    return out;
  }
  long long read_integer() {
    void* reply = nullptr;
    if (redisGetReply(c_, &reply) != REDIS_OK) return -1;
    const long long value = static_cast<redisReply*>(reply)->integer;
    freeReplyObject(reply);
    return value;
  }

 private:
  redisContext* c_;
};

// Freezes the server while the holder's RELEASE of `key` and then the waiter's
// cancellation (`stop`) reach it, so that when it thaws it reads them in that order:
// it grants the waiter first, then sees a cancellation with nothing left to cancel.
void release_then_cancel_while_frozen(Wardend& server, RawConnection& releaser,
                                      const std::string& key, std::uint64_t token,
                                      const std::string& secret, std::stop_source& stop) {
  server.process().signal(SIGSTOP);
  releaser.send({"RELEASE", key, std::to_string(token), secret});
  std::this_thread::sleep_for(50ms);
  stop.request_stop();
  std::this_thread::sleep_for(50ms);
  server.process().signal(SIGCONT);
  EXPECT_EQ(releaser.read_integer(), 1) << "the RELEASE before the cancellation";
}

TEST(WardenCancellation, GrantThatWinsTheRaceWithTheCancellationIsGivenBack) {
  // The server is frozen while the holder's RELEASE and then the waiter's half-close
  // reach it, so when it thaws it reads them in that order: it grants the waiter first,
  // then sees the cancellation with nothing left to cancel. The engine must read that
  // grant and release it.
  Wardend server;
  const WardendProbe probe(server.port());
  Client waiter = Client::open(server.uri());
  Client later = Client::open(server.uri());
  // The holder is a raw connection, so the test knows its owner secret for RELEASE.
  RawConnection releaser(server.port());
  releaser.send({"ACQUIRE", "g/x", "exclusive", "30000"});
  const auto [held_token, held_secret] = releaser.read_grant();

  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.lock("g", "x").acquire(Mode::exclusive, Wait::forever(), stop.get_token());
  });
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").waiters == 1; }));

  release_then_cancel_while_frozen(server, releaser, "g/x", held_token, held_secret, stop);
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(waiting.get()) << "a cancelled wait returned a lease";

  // No trace: nobody holds or waits, and a newcomer gets the lock at once. Its token
  // shows the raced grant really happened (the one in between was given back).
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/x").holder_tokens.empty(); }))
      << "the grant that raced the cancellation was never released";
  EXPECT_EQ(probe.inspect("g/x").waiters, 0u);
  Lease next = later.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GE(next.token(), held_token + 2) << "the race was not exercised: the server "
                                             "cancelled the waiter before granting it";
  // Released already; a second RELEASE must not free `next`.
  releaser.send({"RELEASE", "g/x", std::to_string(held_token), held_secret});
  EXPECT_EQ(releaser.read_integer(), 0);
  EXPECT_EQ(probe.inspect("g/x").holder_tokens, std::vector<std::uint64_t>{next.token()});
}

// The same race for a multi-lock waiting in one ACQUIRESET: the set is granted as the
// server thaws, then its cancellation arrives. Every member's grant must be given back.
TEST(WardenCancellation, SetGrantThatWinsTheRaceWithTheCancellationIsGivenBackWhole) {
  Wardend server;
  const WardendProbe probe(server.port());
  Client waiter = Client::open(server.uri());
  Client later = Client::open(server.uri());
  ASSERT_TRUE(waiter.capabilities().atomic_multi);
  RawConnection releaser(server.port());
  releaser.send({"ACQUIRE", "g/b", "exclusive", "30000"});
  const auto [held_token, held_secret] = releaser.read_grant();

  MultiLock pair = waiter.multi({{"g", "a"}, {"g", "b"}});
  std::stop_source stop;
  auto waiting = std::async(
      std::launch::async, [&] { return pair.acquire(Wait::forever(), stop.get_token()).valid(); });
  ASSERT_TRUE(eventually([&] { return probe.inspect("g/b").waiters == 1; }));
  EXPECT_EQ(probe.inspect("g/a").waiters, 1u) << "the set waits in both queues";
  EXPECT_TRUE(probe.inspect("g/a").holder_tokens.empty()) << "holding nothing";

  release_then_cancel_while_frozen(server, releaser, "g/b", held_token, held_secret, stop);
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(waiting.get()) << "a cancelled wait returned a lease";
  ASSERT_TRUE(eventually([&] {
    return probe.inspect("g/a").holder_tokens.empty() && probe.inspect("g/b").holder_tokens.empty();
  })) << "a member of the set that raced the cancellation was never released";
  MultiLease next = later.multi({{"g", "a"}, {"g", "b"}}).acquire(Wait::none());
  ASSERT_TRUE(next);
  EXPECT_GE(next.tokens().front(), held_token + 3)
      << "the race was not exercised: the server cancelled the set before granting it";
}

}  // namespace
}  // namespace warden::testing
