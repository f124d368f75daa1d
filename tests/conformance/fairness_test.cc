// Conformance: fair (FIFO) and non-fair queueing (DESIGN §2 "Fairness").
//
// No public call says "this request is now queued on the backend", so before the next
// waiter starts, each test waits until the backend's own queue shows the one before it
// (Backend::queued). Backends whose queue the suite cannot read skip these clauses.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "conformance/conformance_suite.h"

namespace warden::conformance {
namespace {

// Records the order in which waiters were granted.
class GrantLog {
 public:
  void add(int who) {
    std::lock_guard lock(mu_);
    order_.push_back(who);
  }
  std::vector<int> order() const {
    std::lock_guard lock(mu_);
    return order_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<int> order_;
};

LockOptions with_fairness(LockOptions options, bool fair) {
  options.fairness = fair ? Fairness::fifo : Fairness::non_fair;
  return options;
}

TEST_P(Conformance, FairWaitersAreGrantedInFifoOrder) {
  WARDEN_SKIP_UNLESS(fair);
  WARDEN_SKIP_UNLESS_QUEUE();
  const LockOptions fair = with_fairness(lock_options(), true);
  Client holder = open_client();
  Lease held = holder.lock(group(), "x", fair).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  constexpr int kWaiters = 4;
  GrantLog log;
  // Everything the threads share exists before the first thread starts.
  std::vector<Client> clients;
  std::vector<std::unique_ptr<Flag>> done;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(open_client());
    done.push_back(std::make_unique<Flag>());
  }
  std::vector<std::jthread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i](std::stop_token stop) {
      Lease lease =
          clients[i].lock(group(), "x", fair).acquire(Mode::exclusive, Wait::forever(), stop);
      if (lease) log.add(i);  // recorded before the release lets the next one in
      done[i]->set();
    });
    ASSERT_TRUE(queue_reaches("x", i + 1)) << "waiter " << i;
    ASSERT_TRUE(log.order().empty()) << "waiter " << i << " was granted too early";
  }

  held.release();
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_TRUE(done[i]->wait_for(kPatience)) << "waiter " << i << " never got the lock";
  }
  EXPECT_EQ(log.order(), (std::vector<int>{0, 1, 2, 3}));
}

TEST_P(Conformance, ConsecutiveSharedWaitersAtTheHeadAreGrantedTogether) {
  WARDEN_SKIP_UNLESS(fair);
  WARDEN_SKIP_UNLESS(shared);
  WARDEN_SKIP_UNLESS_QUEUE();
  const LockOptions fair = with_fairness(lock_options(), true);
  Client holder = open_client();
  Lease held = holder.lock(group(), "x", fair).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  // Queue: shared 0, shared 1, exclusive 2, shared 3.
  const std::vector<Mode> modes = {Mode::shared, Mode::shared, Mode::exclusive, Mode::shared};
  GrantLog log;
  std::atomic<int> readers_inside{0};
  std::atomic<bool> writer_saw_reader{false};
  std::mutex mu;
  std::condition_variable cv;
  int head_readers_arrived = 0;  // guarded by mu
  std::atomic<bool> head_readers_met{false};

  std::vector<Client> clients;
  std::vector<std::unique_ptr<Flag>> done;
  for (std::size_t i = 0; i < modes.size(); ++i) {
    clients.push_back(open_client());
    done.push_back(std::make_unique<Flag>());
  }
  std::vector<std::jthread> waiters;
  for (int i = 0; i < static_cast<int>(modes.size()); ++i) {
    waiters.emplace_back([&, i](std::stop_token stop) {
      const Mode mode = modes[i];
      Lease lease = clients[i].lock(group(), "x", fair).acquire(mode, Wait::forever(), stop);
      if (!lease) return done[i]->set();
      log.add(i);
      if (mode == Mode::exclusive) {
        if (readers_inside.load() > 0) writer_saw_reader = true;
      } else {
        ++readers_inside;
      }
      if (i < 2) {
        // Both head readers must be inside at the same time; neither leaves before
        // the other arrived (or the bound ran out, which fails the test).
        std::unique_lock lock(mu);
        ++head_readers_arrived;
        cv.notify_all();
        if (cv.wait_for(lock, kPatience, [&] { return head_readers_arrived == 2; })) {
          head_readers_met = true;
        }
      }
      if (mode == Mode::shared) --readers_inside;
      lease.release();
      done[i]->set();
    });
    ASSERT_TRUE(queue_reaches("x", static_cast<std::size_t>(i) + 1)) << "waiter " << i;
    ASSERT_TRUE(log.order().empty()) << "waiter " << i << " was granted too early";
  }

  held.release();
  for (int i = 0; i < static_cast<int>(modes.size()); ++i) {
    ASSERT_TRUE(done[i]->wait_for(2 * kPatience)) << "waiter " << i << " never finished";
  }
  EXPECT_TRUE(head_readers_met) << "the two shared waiters at the head were not granted "
                                   "together";
  EXPECT_FALSE(writer_saw_reader) << "the exclusive waiter was granted beside readers";
  const std::vector<int> order = log.order();
  ASSERT_EQ(order.size(), 4u);
  EXPECT_TRUE((order[0] == 0 && order[1] == 1) || (order[0] == 1 && order[1] == 0))
      << "order: " << ::testing::PrintToString(order);
  EXPECT_EQ(order[2], 2) << "order: " << ::testing::PrintToString(order);
  EXPECT_EQ(order[3], 3) << "the shared waiter behind the exclusive one overtook it";
}

TEST_P(Conformance, FairSharedRequestQueuesBehindWaitingExclusive) {
  WARDEN_SKIP_UNLESS(fair);
  WARDEN_SKIP_UNLESS(shared);
  WARDEN_SKIP_UNLESS_QUEUE();
  const LockOptions fair = with_fairness(lock_options(), true);
  Client reader = open_client();
  Client writer = open_client();
  Client late_reader = open_client();
  Lease held = reader.lock(group(), "x", fair).acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(held);

  Holder waiting_writer(writer.lock(group(), "x", fair), Mode::exclusive);
  ASSERT_TRUE(queue_reaches("x", 1));
  ASSERT_FALSE(waiting_writer.finished()) << "exclusive granted beside a shared holder";

  // Compatible with the holder, but it must not overtake the waiting writer.
  Lock late = late_reader.lock(group(), "x", fair);
  EXPECT_FALSE(late.acquire(Mode::shared, Wait::none()));
  EXPECT_FALSE(late.acquire(Mode::shared, Wait::up_to(300ms)));
  EXPECT_TRUE(queue_reaches("x", 1)) << "the late reader's wait left a trace, or the writer left";

  held.release();
  ASSERT_TRUE(waiting_writer.wait_granted()) << "the writer was not granted after release";
  EXPECT_FALSE(late.acquire(Mode::shared, Wait::none()));
  ASSERT_TRUE(waiting_writer.release());
  EXPECT_TRUE(late.acquire(Mode::shared, Wait::up_to(kPatience)));
}

TEST_P(Conformance, NonFairSharedRequestIsGrantedWhileExclusiveWaits) {
  WARDEN_SKIP_UNLESS(non_fair);
  WARDEN_SKIP_UNLESS(shared);
  WARDEN_SKIP_UNLESS_QUEUE();
  const LockOptions barging = with_fairness(lock_options(), false);
  Client reader = open_client();
  Client writer = open_client();
  Client late_reader = open_client();
  Lease held = reader.lock(group(), "x", barging).acquire(Mode::shared, Wait::none());
  ASSERT_TRUE(held);

  Holder waiting_writer(writer.lock(group(), "x", barging), Mode::exclusive);
  ASSERT_TRUE(queue_reaches("x", 1));
  ASSERT_FALSE(waiting_writer.finished()) << "exclusive granted beside a shared holder";

  // Compatible with the current holders: granted at once, whatever is queued.
  Lease joined = late_reader.lock(group(), "x", barging).acquire(Mode::shared, Wait::none());
  EXPECT_TRUE(joined);
  EXPECT_TRUE(queue_reaches("x", 1)) << "the writer is no longer waiting";

  held.release();
  joined.release();
  ASSERT_TRUE(waiting_writer.wait_granted()) << "the writer was not granted after release";
  EXPECT_TRUE(waiting_writer.release());
}

TEST_P(Conformance, NonFairWaiterQueuesAtTheTailAndIsThenServedFifo) {
  WARDEN_SKIP_UNLESS(fair);
  WARDEN_SKIP_UNLESS(non_fair);
  WARDEN_SKIP_UNLESS_QUEUE();
  const LockOptions fair = with_fairness(lock_options(), true);
  const LockOptions barging = with_fairness(lock_options(), false);
  Client holder = open_client();
  Lease held = holder.lock(group(), "x", fair).acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);

  // Queue: fair 0, non-fair 1 (it cannot be granted, so it waits at the tail), fair 2.
  const std::vector<LockOptions> options = {fair, barging, fair};
  GrantLog log;
  std::vector<Client> clients;
  std::vector<std::unique_ptr<Flag>> done;
  for (std::size_t i = 0; i < options.size(); ++i) {
    clients.push_back(open_client());
    done.push_back(std::make_unique<Flag>());
  }
  std::vector<std::jthread> waiters;
  for (int i = 0; i < static_cast<int>(options.size()); ++i) {
    waiters.emplace_back([&, i](std::stop_token stop) {
      Lease lease =
          clients[i].lock(group(), "x", options[i]).acquire(Mode::exclusive, Wait::forever(), stop);
      if (lease) log.add(i);  // recorded before the release lets the next one in
      done[i]->set();
    });
    ASSERT_TRUE(queue_reaches("x", static_cast<std::size_t>(i) + 1)) << "waiter " << i;
    ASSERT_TRUE(log.order().empty()) << "waiter " << i << " was granted too early";
  }

  held.release();
  for (int i = 0; i < static_cast<int>(options.size()); ++i) {
    ASSERT_TRUE(done[i]->wait_for(kPatience)) << "waiter " << i << " never got the lock";
  }
  EXPECT_EQ(log.order(), (std::vector<int>{0, 1, 2}))
      << "0 and 2 are fair, 1 is not; a waiting non-fair request keeps its place";
}

}  // namespace
}  // namespace warden::conformance
