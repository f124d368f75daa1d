// ElectionConformance: one leader at a time, terms that increase, values that say who
// leads, and observers that see every change in term order.
#include "warden/election.h"

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "conformance/election_suite.h"
#include "support/observed_leaders.h"
#include "warden/fence_gate.h"

namespace warden::conformance {
namespace {

// An engine test executable that has no elections does not instantiate this suite.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ElectionConformance);

using testing::ObservedLeaders;

TEST_P(ElectionConformance, ReportsElectionsAsPinned) {
  EXPECT_TRUE(capabilities().election) << "instantiate this suite only where pinned";
  EXPECT_TRUE(reported_capabilities().election);
}

TEST_P(ElectionConformance, TheFirstCandidateLeadsWithItsValueAndItsTokenIsItsTerm) {
  Client a = open_client();
  Client b = open_client();
  Election election = a.election(group(), "leader", lock_options());
  EXPECT_EQ(election.leader(), std::nullopt) << "nobody campaigned yet";
  Leadership leading = election.campaign("node-a:8080", Wait::none());
  ASSERT_TRUE(leading);
  EXPECT_EQ(leading.value(), "node-a:8080");
  EXPECT_EQ(leading.term(), leading.lease().token());
  EXPECT_EQ(leading.lease().mode(), Mode::exclusive);
  const auto seen = b.election(group(), "leader", lock_options()).leader();
  ASSERT_TRUE(seen) << "another client sees the leader";
  EXPECT_EQ(*seen, (Leader{"node-a:8080", leading.term()}));
  EXPECT_TRUE(b.check(leading.lease().sequencer()));
  // The election is the lock (group, name): a lock request on it waits for the leader.
  EXPECT_FALSE(b.lock(group(), "leader", lock_options()).acquire(Mode::exclusive, Wait::none()));
}

TEST_P(ElectionConformance, TheNextCandidateLeadsWhenTheLeaderResignsWithAHigherTerm) {
  Client a = open_client();
  Client b = open_client();
  Election ea = a.election(group(), "leader", lock_options());
  Election eb = b.election(group(), "leader", lock_options());
  Leadership first = ea.campaign("a", Wait::none());
  ASSERT_TRUE(first);
  const std::uint64_t first_term = first.term();
  auto second =
      std::async(std::launch::async, [&] { return eb.campaign("b", Wait::up_to(kPatience)); });
  EXPECT_TRUE(queue_reaches("leader", 1)) << "the second candidate queues behind the leader";
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  EXPECT_EQ(ea.leader(), (Leader{"a", first_term})) << "a waiting candidate is not shown";
  first.resign();
  EXPECT_FALSE(first) << "resign empties the Leadership";
  Leadership next = second.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.term(), first_term);
  EXPECT_EQ(ea.leader(), (Leader{"b", next.term()}));
  FenceGate gate;
  EXPECT_TRUE(gate.admit(Sequencer{group(), "leader", Mode::exclusive, first_term}));
  EXPECT_TRUE(gate.admit(next.lease().sequencer())) << "a later term passes the gate";
  EXPECT_FALSE(gate.admit(Sequencer{group(), "leader", Mode::exclusive, first_term}))
      << "the old leader's term is refused after the new one's";
  next.resign();
  EXPECT_EQ(ea.leader(), std::nullopt);
}

TEST_P(ElectionConformance, AnAsyncCampaignLeadsWithItsValueWhenTheLeaderResigns) {
  Client a = open_client();
  Client b = open_client();
  Election ea = a.election(group(), "leader", lock_options());
  Leadership first = ea.campaign("a", Wait::none());
  ASSERT_TRUE(first);
  std::mutex mu;
  std::condition_variable told;
  int calls = 0;
  Leadership won;
  b.election(group(), "leader", lock_options())
      .campaign_async("b", Wait::up_to(kLongDeadline),
                      [&](std::exception_ptr error, Leadership leadership) {
                        std::lock_guard guard(mu);
                        ++calls;
                        if (!error) won = std::move(leadership);
                        told.notify_all();
                      });
  ASSERT_TRUE(queue_reaches("leader", 1));
  first.resign();
  std::unique_lock lock(mu);
  ASSERT_TRUE(told.wait_for(lock, kPatience, [&] { return calls > 0; }));
  ASSERT_TRUE(won) << "the waiting candidate did not lead after the resignation";
  EXPECT_EQ(won.value(), "b");
  EXPECT_EQ(ea.leader(), (Leader{"b", won.term()}));
  won.resign();
  EXPECT_EQ(calls, 1);
}

// A Leadership dropped sends its release without waiting; the same client's leader()
// and observe() settle it first, as a try does (docs/contract.md): the client never
// reports itself as the leader after it let go.
TEST_P(ElectionConformance, LeaderRightAfterALeadershipIsDroppedIsNotTheDroppedOne) {
  Client a = open_client();
  Election ea = a.election(group(), "leader", lock_options());
  for (int i = 0; i < 30; ++i) {
    {
      Leadership dropped = ea.campaign("a", Wait::none());
      ASSERT_TRUE(dropped) << "cycle " << i;
    }
    ASSERT_EQ(ea.leader(), std::nullopt) << "cycle " << i << ": the dropped leader is still shown";
  }
}

TEST_P(ElectionConformance, ACampaignThatTimesOutOrIsCancelledLeavesNoTrace) {
  Client a = open_client();
  Client b = open_client();
  Election ea = a.election(group(), "leader", lock_options());
  Election eb = b.election(group(), "leader", lock_options());
  Leadership leading = ea.campaign("a", Wait::none());
  ASSERT_TRUE(leading);
  EXPECT_FALSE(eb.campaign("b", Wait::none()));
  EXPECT_FALSE(eb.campaign("b", Wait::up_to(std::chrono::milliseconds(100))));
  std::stop_source cancel;
  auto cancelled = std::async(
      std::launch::async, [&] { return eb.campaign("b", Wait::forever(), cancel.get_token()); });
  EXPECT_TRUE(queue_reaches("leader", 1));
  cancel.request_stop();
  EXPECT_FALSE(cancelled.get());
  leading.resign();
  EXPECT_EQ(ea.leader(), std::nullopt) << "no candidate that gave up was made leader";
  EXPECT_TRUE(queue_reaches("leader", 0));
}

TEST_P(ElectionConformance, ProclaimChangesTheValueAndKeepsTheTerm) {
  Client a = open_client();
  Client b = open_client();
  Election ea = a.election(group(), "leader", lock_options());
  Leadership leading = ea.campaign("starting", Wait::none());
  ASSERT_TRUE(leading);
  const std::uint64_t term = leading.term();
  leading.proclaim("serving on :8080");
  EXPECT_EQ(leading.value(), "serving on :8080");
  EXPECT_EQ(b.election(group(), "leader").leader(), (Leader{"serving on :8080", term}));
  leading.proclaim("");
  EXPECT_EQ(b.election(group(), "leader").leader(), (Leader{"", term}));
  const std::string binary("a\0b\xff", 4);
  leading.proclaim(binary);
  EXPECT_EQ(b.election(group(), "leader").leader(), (Leader{binary, term})) << "values are bytes";
  leading.resign();
  try {
    leading.proclaim("after resigning");
    ADD_FAILURE() << "a resigned leader proclaimed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::lost) << e.what();
  }
  EXPECT_EQ(ea.leader(), std::nullopt);
}

TEST_P(ElectionConformance, ALeaderThatStopsRenewingLosesAndTheNextCandidateLeads) {
  Client stalled = open_client_without_renewals();
  Client b = open_client();
  const LockOptions short_lease = lock_options_with_ttl(std::chrono::milliseconds(1000));
  Election stalled_election = stalled.election(group(), "leader", short_lease);
  Leadership old = stalled_election.campaign("old", Wait::none());
  ASSERT_TRUE(old);
  Leadership next =
      b.election(group(), "leader", short_lease).campaign("new", Wait::up_to(kPatience));
  ASSERT_TRUE(next) << "the next candidate was never made leader";
  EXPECT_GT(next.term(), old.term());
  EXPECT_TRUE(eventually([&] { return old.lost(); })) << "the old leader was not told";
  try {
    old.proclaim("still here?");
    ADD_FAILURE() << "a leader whose lease ran out proclaimed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::lost) << e.what();
  }
  EXPECT_EQ(b.election(group(), "leader").leader(), (Leader{"new", next.term()}))
      << "the old leader's proclaim changed the new one's value";
}

TEST_P(ElectionConformance, AnObserverSeesEveryChangeInTermOrderAndTheLastOne) {
  Client a = open_client();
  Client b = open_client();
  Client watcher = open_client();
  ObservedLeaders observed;
  std::jthread observer = observed.observe(watcher.election(group(), "leader"), 10ms);
  ASSERT_TRUE(observed.saw(std::nullopt)) << "the observer did not report the start";
  Leadership first = a.election(group(), "leader", lock_options()).campaign("a", Wait::none());
  ASSERT_TRUE(first);
  ASSERT_TRUE(observed.saw(Leader{"a", first.term()}));
  first.proclaim("a2");
  ASSERT_TRUE(observed.saw(Leader{"a2", first.term()}));
  first.resign();
  ASSERT_TRUE(observed.saw(std::nullopt));
  Leadership second = b.election(group(), "leader", lock_options()).campaign("b", Wait::none());
  ASSERT_TRUE(second);
  ASSERT_TRUE(observed.saw(Leader{"b", second.term()}));
  observer.request_stop();
  observer.join();

  std::uint64_t term = 0;
  for (const auto& leader : observed.seen()) {
    if (!leader) continue;
    EXPECT_GE(leader->term, term) << "a term went backwards";
    term = leader->term;
  }
  const auto seen = observed.seen();
  for (std::size_t i = 1; i < seen.size(); ++i) {
    EXPECT_NE(seen[i], seen[i - 1]) << "the same state was reported twice in a row";
  }
}

// Where the engine watches, an observer whose poll is an hour learns every change from
// the backend: a grant, a proclaim, a lease that runs out, the next grant. Elsewhere it
// polls, and the clause checks the same with a short poll.
TEST_P(ElectionConformance, AnObserverIsToldOfEveryKindOfChangeWhereTheEngineWatches) {
  using namespace std::chrono_literals;
  Client lapsing = open_client_without_renewals();  // a leader that stops renewing
  Client b = open_client();
  Client watcher = open_client();
  const Clock::duration poll = capabilities().watch ? Clock::duration(1h) : 10ms;
  ObservedLeaders observed;
  std::jthread observer = observed.observe(watcher.election(group(), "leader"), poll);
  ASSERT_TRUE(observed.saw(std::nullopt)) << "the observer did not report the start";
  // The observer must read the grant and the proclaim while the lease lasts: 4 s leaves
  // room for a loaded machine (two CPU hogs beside ctest).
  constexpr auto kLapsingTtl = 4s;
  Leadership first = lapsing.election(group(), "leader", lock_options_with_ttl(kLapsingTtl))
                         .campaign("a", Wait::none());
  ASSERT_TRUE(first);
  ASSERT_TRUE(observed.saw(Leader{"a", first.term()}))
      << "a grant was not signalled; the observer was told: " << observed.describe();
  first.proclaim("a2");
  ASSERT_TRUE(observed.saw(Leader{"a2", first.term()}))
      << "a proclaim was not signalled; the observer was told: " << observed.describe();
  ASSERT_TRUE(observed.saw(std::nullopt, kLapsingTtl + kPatience))
      << "a lease that ran out was not signalled; the observer was told: " << observed.describe();
  Leadership second = b.election(group(), "leader", lock_options()).campaign("b", Wait::none());
  ASSERT_TRUE(second);
  ASSERT_TRUE(observed.saw(Leader{"b", second.term()})) << "the next grant was not signalled";
  observer.request_stop();
  observer.join();  // a stop ends a wait on the watch at once
}

TEST_P(ElectionConformance, BadValuesAreRefusedBeforeAnyIo) {
  Client a = open_client();
  Election election = a.election(group(), "leader", lock_options());
  const std::string too_long(kMaxLeaderValueBytes + 1, 'v');
  try {
    (void)election.campaign(too_long, Wait::none());
    ADD_FAILURE() << "a value over the limit campaigned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  }
  EXPECT_EQ(election.leader(), std::nullopt);
  Leadership leading = election.campaign(std::string(kMaxLeaderValueBytes, 'v'), Wait::none());
  ASSERT_TRUE(leading) << "a value of exactly the limit is fine";
  try {
    leading.proclaim(too_long);
    ADD_FAILURE() << "a value over the limit was proclaimed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  }
  EXPECT_EQ(election.leader()->value, std::string(kMaxLeaderValueBytes, 'v'));
  for (const char* bad_group : {"", "has/slash", "has space"}) {
    try {
      (void)a.election(bad_group, "leader");
      ADD_FAILURE() << "group '" << bad_group << "' was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    }
  }
}

}  // namespace
}  // namespace warden::conformance
