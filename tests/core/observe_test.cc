// Election::observe on mem://: the table's watch wakes the observer on every grant,
// proclaim and release, so an observer whose poll is an hour still sees each at once.
// (A lease that runs out in mem:// is noticed when a call brings the table's clock past
// it; the watch is incomplete there, and the observer's poll covers it.)
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "support/waiting.h"
#include "warden/client.h"
#include "warden/election.h"

namespace warden {
namespace {

using namespace std::chrono_literals;

using testing::eventually;

TEST(Observe, AMemObserverIsWokenByTheTableOnGrantProclaimAndRelease) {
  Client leader = Client::open("mem://observe-wakes");
  Client watcher = Client::open("mem://observe-wakes");
  std::mutex mu;
  std::vector<std::optional<Leader>> seen;
  const auto last_is = [&](const std::optional<Leader>& expected) {
    return eventually([&] {
      std::lock_guard lock(mu);
      return !seen.empty() && seen.back() == expected;
    });
  };
  std::jthread observer([&](std::stop_token stop) {
    watcher.election("g", "e").observe(
        [&](const std::optional<Leader>& now) {
          std::lock_guard lock(mu);
          seen.push_back(now);
        },
        stop, std::chrono::hours(1));
  });
  ASSERT_TRUE(last_is(std::nullopt));
  Leadership leading = leader.election("g", "e").campaign("a", Wait::none());
  ASSERT_TRUE(leading);
  EXPECT_TRUE(last_is(Leader{"a", leading.term()})) << "a grant did not wake the observer";
  leading.proclaim("b");
  EXPECT_TRUE(last_is(Leader{"b", leading.term()})) << "a proclaim did not wake the observer";
  leading.resign();
  EXPECT_TRUE(last_is(std::nullopt)) << "a release did not wake the observer";
  observer.request_stop();
  observer.join();  // a stop ends the wait on the watch at once
  std::lock_guard lock(mu);
  EXPECT_EQ(seen.size(), 4u) << "each change was reported once";
}

}  // namespace
}  // namespace warden
