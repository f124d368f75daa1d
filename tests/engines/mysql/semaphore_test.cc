// mysql:// semaphores behind the engine's back, against a real MariaDB: k permits of N
// are k slot locks "warden:DB:ID/s<i>" (i < N) held by the grant's session beside its
// token lock, taken by the head of the FIFO turnstile "warden:DB:ID/t"; N is the row of
// warden_semaphores (docs/engines/mysql.md, Semaphores). Driven through the engine
// itself (core::Engine with capacity and permits), and read with the fixture's root
// session.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "core/engine.h"
#include "core/uri.h"
#include "engines/mysql/mysql_engine.h"
#include "support/mariadb_server.h"
#include "support/waiting.h"
#include "warden/error.h"
#include "warden/options.h"

namespace warden::testing {
namespace {

using namespace std::chrono_literals;

constexpr auto kPatience = 10s;

std::unique_ptr<core::Engine> open_engine(const MariaDbServer& server) {
  return engines::mysql::open(core::Uri::parse(server.uri()), ClientOptions{});
}

core::AcquireRequest permits(std::uint32_t k, std::uint32_t of, Clock::time_point deadline,
                             std::stop_token stop = {}, std::string name = "s") {
  core::AcquireRequest request;
  request.key = core::LockKey{"g", std::move(name)};
  request.mode = Mode::shared;
  request.options.ttl = 60s;
  request.options.fairness = Fairness::fifo;
  request.deadline = deadline;
  request.stop = std::move(stop);
  request.capacity = of;
  request.permits = k;
  return request;
}

core::AcquireRequest lock_request() {
  core::AcquireRequest request;
  request.key = core::LockKey{"g", "s"};
  request.options.ttl = 60s;
  request.options.fairness = Fairness::fifo;
  request.deadline = Clock::time_point::min();
  return request;
}

Errc error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.code();
  }
  return Errc::internal;
}

class MysqlSemaphore : public ::testing::Test {
 protected:
  std::string lock() { return "warden:warden:" + std::to_string(*server_.lock_id("g", "s")); }

  // Sessions holding the semaphore's slots (0 .. n-1), as "session:count" lines.
  std::string slot_holders(std::uint32_t n) {
    std::string out;
    for (const auto& row :
         server_.query("SELECT IS_USED_LOCK(CONCAT('" + lock() +
                       "/s', seq)) h, COUNT(*) FROM warden.seq_0_to_" + std::to_string(n - 1) +
                       " GROUP BY h HAVING h IS NOT NULL ORDER BY h")) {
      out += row[0].value_or("?") + ":" + row[1].value_or("?") + "\n";
    }
    return out;
  }

  std::string stored_capacity() {
    return server_
        .scalar("SELECT capacity FROM warden.warden_semaphores WHERE id = " +
                std::to_string(*server_.lock_id("g", "s")))
        .value_or("none");
  }

  std::optional<std::string> used(const std::string& name) {
    return server_.scalar("SELECT IS_USED_LOCK('" + name + "')");
  }

  MariaDbServer server_;
};

TEST_F(MysqlSemaphore, PermitsAreSlotLocksOfTheGrantsSessionAndReleaseLeavesNothing) {
  auto engine = open_engine(server_);
  const auto granted = engine->acquire(permits(3, 4, Clock::time_point::min()));
  ASSERT_TRUE(granted);
  EXPECT_EQ(granted->grant.mode, Mode::shared);
  EXPECT_EQ(granted->grant.permits, 3u);
  EXPECT_EQ(stored_capacity(), "4");
  const auto session = used(lock() + "/" + std::to_string(granted->grant.token));
  ASSERT_TRUE(session) << "the token lock is held";
  EXPECT_EQ(slot_holders(4), *session + ":3\n");
  EXPECT_EQ(used(lock()), std::nullopt) << "a semaphore does not take the lock's own name";
  EXPECT_EQ(used(lock() + "/t"), std::nullopt) << "the turnstile is left once granted";
  const LockStatus status = engine->inspect(core::LockKey{"g", "s"});
  EXPECT_EQ(status.permits, 4u);
  ASSERT_EQ(status.holders.size(), 1u);
  EXPECT_EQ(status.holders[0].permits, 3u);
  EXPECT_EQ(status.holders[0].token, granted->grant.token);

  engine->release(granted->grant);
  EXPECT_EQ(slot_holders(4), "");
  EXPECT_EQ(used(lock() + "/" + std::to_string(granted->grant.token)), std::nullopt);
  EXPECT_EQ(used(lock() + "/t"), std::nullopt);
  EXPECT_EQ(server_.waiting_sessions("g", "s"), 0u);
  const LockStatus idle = engine->inspect(core::LockKey{"g", "s"});
  EXPECT_TRUE(idle.holders.empty() && idle.waiters.empty());
  EXPECT_EQ(idle.permits, 0u) << "an idle semaphore shows no N";
}

// The head of the queue holds the slots it took so far while it waits for the rest; status
// shows it as a waiter, never as a holder, however its taking and giving back interleave
// with the reads status makes (a head whose turnstile was read before it had it).
TEST_F(MysqlSemaphore, AHeadTakingSlotsIsNeverShownAsAHolder) {
  auto holder = open_engine(server_);
  auto head = open_engine(server_);
  auto reader = open_engine(server_);
  const auto three = holder->acquire(permits(3, 4, Clock::time_point::min()));
  ASSERT_TRUE(three);
  std::jthread waiter([&](std::stop_token stop) {
    // Each try becomes the head, takes the free slot, waits for one more and gives both
    // back: many heads, each appearing and leaving while status reads.
    while (!stop.stop_requested()) {
      EXPECT_FALSE(head->acquire(permits(2, 4, Clock::now() + 20ms)));
    }
  });
  int heads_seen = 0;
  for (int i = 0; i < 400; ++i) {
    const LockStatus status = reader->inspect(core::LockKey{"g", "s"});
    ASSERT_EQ(status.holders.size(), 1u) << "read " << i << " shows a head as a holder";
    EXPECT_EQ(status.holders[0].permits, 3u);
    EXPECT_EQ(status.holders[0].token, three->grant.token);
    heads_seen += status.waiters.empty() ? 0 : 1;
  }
  waiter.request_stop();
  waiter.join();
  EXPECT_GT(heads_seen, 0) << "no read saw the head: the case tested nothing";
  holder->release(three->grant);
}

// A session holding slots of the semaphore but no token lock is no holder: what status
// sees of a head that began taking slots after its first read of the sessions running
// warden_take and gave them back before its last (a try of 20 ms inside one slow read,
// as on a loaded machine). Here a session of the engine's account holds the free slots
// without running warden_take at all, for the whole read.
TEST_F(MysqlSemaphore, SlotsHeldWithoutATokenAreNoHolder) {
  auto holder = open_engine(server_);
  auto reader = open_engine(server_);
  const auto one = holder->acquire(permits(1, 4, Clock::time_point::min()));
  ASSERT_TRUE(one);
  std::string take_all = "SELECT ";
  for (int i = 0; i < 4; ++i) {
    take_all += "GET_LOCK('" + lock() + "/s" + std::to_string(i) + "', 0), ";
  }
  take_all += "SLEEP(3) /* slots without a token */";
  auto squatter =
      std::async(std::launch::async, [&] { server_.query_as("warden", "secret", take_all); });
  ASSERT_TRUE(eventually(
      [&] {
        return server_.scalar(
                   "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE "
                   "STATE = 'User sleep' AND LOCATE('without a token', INFO) > 0") == "1";
      },
      kPatience));
  const LockStatus status = reader->inspect(core::LockKey{"g", "s"});
  ASSERT_EQ(status.holders.size(), 1U)
      << "a session holding slots without a token is shown as a holder";
  EXPECT_EQ(status.holders[0].token, one->grant.token);
  EXPECT_EQ(status.holders[0].permits, 1U);
  squatter.get();
  holder->release(one->grant);
}

// A session of the engine's account whose statement names warden_take on the semaphore
// but has not reached its turnstile (here: one that sleeps first) is not queued, and a try may still go before
// it; status must not list it as a waiter, or a caller waiting for the queue to form
// would go on too early.
TEST_F(MysqlSemaphore, AStatementThatHasNotReachedTheTurnstileIsNoWaiter) {
  auto holder = open_engine(server_);
  auto reader = open_engine(server_);
  const auto one = holder->acquire(permits(1, 4, Clock::time_point::min()));
  ASSERT_TRUE(one);
  const std::string sleeping =
      "SELECT SLEEP(3), \"warden_take('" + lock() + "', 3, 4, 60)\" /* not queued */";
  auto not_queued = std::async(std::launch::async, [&] { server_.query_as("warden", "secret", sleeping); });
  ASSERT_TRUE(eventually(
      [&] {
        return server_.scalar("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE "
                              "STATE = 'User sleep' AND LOCATE('not queued', INFO) > 0") == "1";
      },
      kPatience));
  const LockStatus status = reader->inspect(core::LockKey{"g", "s"});
  EXPECT_TRUE(status.waiters.empty()) << "a statement not yet queued is listed as a waiter";
  ASSERT_EQ(status.holders.size(), 1u);
  EXPECT_EQ(status.holders[0].permits, 1u);
  EXPECT_EQ(server_.waiting_sessions("g", "s"), 0u);
  for (const auto& summary : reader->list("g")) {
    EXPECT_EQ(summary.waiters, 0u) << summary.name;
  }
  not_queued.get();
  holder->release(one->grant);
}

TEST_F(MysqlSemaphore, KillingAHoldersSessionFreesItsPermitsToAWaiter) {
  auto holder = open_engine(server_);
  auto waiter = open_engine(server_);
  const auto all = holder->acquire(permits(2, 2, Clock::time_point::min()));
  ASSERT_TRUE(all);
  auto next = std::async(std::launch::async, [&] {
    return waiter->acquire(permits(2, 2, Clock::now() + 3 * kPatience));
  });
  ASSERT_TRUE(eventually([&] { return server_.waiting_sessions("g", "s") == 1; }, kPatience));
  EXPECT_EQ(next.wait_for(100ms), std::future_status::timeout) << "granted beside the holder";
  const auto session = used(lock() + "/" + std::to_string(all->grant.token));
  ASSERT_TRUE(session);
  server_.query("KILL CONNECTION " + *session);
  const auto granted = next.get();
  ASSERT_TRUE(granted) << "the killed holder's permits never reached the waiter";
  EXPECT_GT(granted->grant.token, all->grant.token);
  const auto renewed = holder->renew(std::span<const core::GrantRef>(&all->grant, 1));
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_FALSE(renewed[0].expires) << "the killed holder's renewal reports it lost";
  EXPECT_FALSE(holder->check(Sequencer{"g", "s", Mode::shared, all->grant.token}));
  EXPECT_TRUE(waiter->check(Sequencer{"g", "s", Mode::shared, granted->grant.token}));
  waiter->release(granted->grant);
  EXPECT_EQ(slot_holders(2), "");
}

TEST_F(MysqlSemaphore, AnotherNumberWhileInUseIsRefusedAndChangesNothing) {
  auto a = open_engine(server_);
  auto b = open_engine(server_);
  const auto one = a->acquire(permits(1, 4, Clock::time_point::min()));
  ASSERT_TRUE(one);
  const std::string before = slot_holders(4);
  EXPECT_EQ(error_of([&] { b->acquire(permits(1, 5, Clock::now() + 1s)); }),
            Errc::invalid_argument);
  EXPECT_EQ(stored_capacity(), "4");
  EXPECT_EQ(error_of([&] { b->acquire(lock_request()); }), Errc::invalid_argument)
      << "a lock of a semaphore's name";
  EXPECT_EQ(used(lock()), std::nullopt) << "the refused lock request left the lock taken";
  EXPECT_EQ(slot_holders(4), before);
  EXPECT_EQ(server_.waiting_sessions("g", "s"), 0u);

  a->release(one->grant);
  const auto five = b->acquire(permits(5, 5, Clock::time_point::min()));
  ASSERT_TRUE(five) << "an idle semaphore opens with another N";
  EXPECT_EQ(stored_capacity(), "5");
  b->release(five->grant);
  const auto plain = a->acquire(lock_request());
  ASSERT_TRUE(plain) << "an idle semaphore's name may be a lock";
  EXPECT_EQ(error_of([&] { b->acquire(permits(1, 5, Clock::time_point::min())); }),
            Errc::invalid_argument)
      << "a semaphore of a held lock's name";
  EXPECT_EQ(slot_holders(5), "");
  a->release(plain->grant);
}

// Sessions opening one new semaphore with the same N at once all agree on it: none may
// read the row as missing and the first opener's turnstile as another N in use.
TEST_F(MysqlSemaphore, SessionsOpeningOneNewSemaphoreAtOnceAllTakeItsPermits) {
  constexpr int kOpeners = 16;
  constexpr int kSemaphores = 40;
  std::vector<std::unique_ptr<core::Engine>> engines;
  for (int i = 0; i < kOpeners; ++i) engines.push_back(open_engine(server_));
  std::vector<std::string> failures;
  std::mutex failures_mu;
  for (int round = 0; round < kSemaphores; ++round) {
    const std::string name = "opened-" + std::to_string(round);
    std::latch start(kOpeners);
    std::vector<std::thread> openers;
    for (auto& engine : engines) {
      openers.emplace_back([&, e = engine.get()] {
        start.arrive_and_wait();
        try {
          const auto one = e->acquire(permits(1, 3, Clock::now() + kPatience, {}, name));
          if (one) e->release(one->grant);
          if (!one) throw Error(Errc::deadline_exceeded, "not granted within the patience");
        } catch (const Error& error) {
          std::lock_guard lock(failures_mu);
          failures.push_back(name + ": " + error.what());
        }
      });
    }
    for (auto& opener : openers) opener.join();
  }
  EXPECT_TRUE(failures.empty()) << failures.size() << " opens failed, the first: "
                                << (failures.empty() ? "" : failures.front());
}

TEST_F(MysqlSemaphore, ACancelledOrTimedOutWaitHoldsNothingOnTheServer) {
  auto a = open_engine(server_);
  auto b = open_engine(server_);
  const auto two = a->acquire(permits(2, 3, Clock::time_point::min()));
  ASSERT_TRUE(two);
  EXPECT_FALSE(b->acquire(permits(2, 3, Clock::now() + 300ms)));
  EXPECT_EQ(used(lock() + "/t"), std::nullopt);
  std::stop_source cancel;
  auto waiting = std::async(std::launch::async, [&] {
    return b->acquire(permits(2, 3, Clock::time_point::max(), cancel.get_token()));
  });
  // The head holds the turnstile and the one free slot while it waits for a second.
  ASSERT_TRUE(eventually([&] { return used(lock() + "/t").has_value(); }, kPatience));
  ASSERT_TRUE(
      eventually([&] { return slot_holders(3).find(":1\n") != std::string::npos; }, kPatience));
  cancel.request_stop();
  EXPECT_FALSE(waiting.get());
  EXPECT_TRUE(eventually([&] { return !used(lock() + "/t").has_value(); }, kPatience));
  EXPECT_TRUE(
      eventually([&] { return slot_holders(3).find(":1\n") == std::string::npos; }, kPatience))
      << slot_holders(3);
  a->release(two->grant);
  EXPECT_EQ(slot_holders(3), "");
}

// A database installed (by warden's account) before semaphores has a warden_grant that
// does not read warden_semaphores: opening a client replaces it, so its locks refuse a
// semaphore's name.
TEST_F(MysqlSemaphore, AnOlderGrantFunctionIsReplacedSoLocksSeeSemaphores) {
  open_engine(server_);
  server_.query(
      "CREATE OR REPLACE DEFINER = 'warden'@'%' FUNCTION warden.warden_grant(p_name VARCHAR(64) "
      "CHARACTER SET ascii, "
      "p_wait DOUBLE) RETURNS BIGINT UNSIGNED NOT DETERMINISTIC MODIFIES SQL DATA "
      "RETURN CASE GET_LOCK(p_name, p_wait) WHEN 1 THEN IF(GET_LOCK(CONCAT(p_name, '/', "
      "NEXTVAL(warden_tokens)), 0) = 1, LASTVAL(warden_tokens), NULL) WHEN 0 THEN 0 END");
  auto a = open_engine(server_);
  auto b = open_engine(server_);
  EXPECT_EQ(server_.scalar("SELECT ROUTINE_DEFINITION LIKE '%warden_semaphores%' FROM "
                           "information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'warden' AND "
                           "ROUTINE_NAME = 'warden_grant'"),
            "1");
  const auto one = a->acquire(permits(1, 2, Clock::time_point::min()));
  ASSERT_TRUE(one);
  EXPECT_EQ(error_of([&] { b->acquire(lock_request()); }), Errc::invalid_argument);
  a->release(one->grant);
}

}  // namespace
}  // namespace warden::testing
