// Election::observe on mem://: the table's watch wakes the observer on every grant,
// proclaim and release, so an observer whose poll is an hour still sees each at once.
// (A lease that runs out in mem:// is noticed when a call brings the table's clock past
// it; the watch is incomplete there, and the observer's poll covers it.)
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/observed_leaders.h"
#include "warden/client.h"
#include "warden/election.h"

namespace warden {
namespace {

using namespace std::chrono_literals;

TEST(Observe, AMemObserverIsWokenByTheTableOnGrantProclaimAndRelease) {
  Client leader = Client::open("mem://observe-wakes");
  Client watcher = Client::open("mem://observe-wakes");
  testing::ObservedLeaders observed;
  std::jthread observer = observed.observe(watcher.election("g", "e"), std::chrono::hours(1));
  ASSERT_TRUE(observed.saw(std::nullopt));
  Leadership leading = leader.election("g", "e").campaign("a", Wait::none());
  ASSERT_TRUE(leading);
  EXPECT_TRUE(observed.saw(Leader{"a", leading.term()})) << "a grant did not wake the observer";
  leading.proclaim("b");
  EXPECT_TRUE(observed.saw(Leader{"b", leading.term()})) << "a proclaim did not wake the observer";
  leading.resign();
  EXPECT_TRUE(observed.saw(std::nullopt)) << "a release did not wake the observer";
  observer.request_stop();
  observer.join();  // a stop ends the wait on the watch at once
  EXPECT_EQ(observed.seen().size(), 4u) << "each change was reported once";
}

}  // namespace
}  // namespace warden
