// The checker on hand-written histories: each test is a small run with one thing worth
// judging in it, and says what the report must make of it.

#include "torture/checker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events.h"

namespace warden::torture {
namespace {

using namespace testing;  // the event helpers of events.h

CheckOptions options(double recovery_bound_ms = 1500, double run_end_ms = 60'000) {
  CheckOptions o;
  o.recovery_bound = ms(recovery_bound_ms);
  o.run_end = ms(run_end_ms);
  return o;
}

// The summary line of property `name` ("PASS  name  ..."), or "" if there is none.
std::string line_of(const CheckResult& result, const CheckOptions& o, const std::string& name) {
  for (const std::string& line : result.summary(o)) {
    if (line.find("  " + name + " ") != std::string::npos) return line;
  }
  return "";
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(Checker, CleanSequentialRunPassesEverything) {
  const std::vector<Event> history = {
      request(0, 0),           request(1, 0.5), grant(0, 1, 1),          write(0, 1, 2, 3, true),
      write(0, 1, 4, 5, true),  // the same holder writes twice with one token
      release(0, 6, 1),        grant(1, 7, 2),  write(1, 2, 8, 9, true), release(1, 10, 2),
  };
  const CheckResult r = check(history, options());
  EXPECT_EQ(r.grants, 2);
  EXPECT_EQ(r.writes, 3);
  EXPECT_EQ(r.writes_rejected, 0);
  EXPECT_EQ(r.faults, 0);
  EXPECT_TRUE(r.overlaps.empty());
  EXPECT_EQ(r.stale_accepted, 0);
  EXPECT_EQ(r.tokens_backwards, 0);
  EXPECT_TRUE(r.recoveries.empty());
  EXPECT_EQ(r.recoveries_unfinished, 0);
  EXPECT_EQ(r.lost_told, 0);
  EXPECT_EQ(r.lost_untold, 0);
  EXPECT_EQ(r.waits_unfinished, 0);
  EXPECT_TRUE(r.passed(options()));
  const std::vector<std::string> summary = r.summary(options());
  EXPECT_EQ(summary.size(), 7u);
  for (const std::string& line : summary) {
    EXPECT_TRUE(starts_with(line, "PASS  ") || starts_with(line, "INFO  ")) << line;
  }
  // The names are one column: the detail starts at the same place on every line.
  EXPECT_EQ(line_of(r, options(), "stale_accepted").find("0 of 3"),
            line_of(r, options(), "waits_unfinished").find("0 requests"));
}

TEST(Checker, UnsortedHistoryIsJudgedInTimeOrder) {
  const std::vector<Event> history = {
      release(1, 10, 2), grant(1, 7, 2), write(0, 1, 2, 3, true),
      release(0, 6, 1),  grant(0, 1, 1), write(1, 2, 8, 9, true),
  };
  const CheckResult r = check(history, options());
  EXPECT_EQ(r.tokens_backwards, 0);
  EXPECT_EQ(r.lost_untold, 0);
  EXPECT_TRUE(r.passed(options()));
}

TEST(Checker, OverlappingHoldsAreReportedWithTheirStretch) {
  const std::vector<Event> history = {
      grant(0, 0, 1),           write(0, 1, 1, 5, true),
      write(0, 1, 5, 10, true),  // client 0's hold, as the resource saw it: 1..10 ms
      grant(1, 6, 2),           write(1, 2, 7, 12, true),   // client 1's: 7..12 ms
      grant(2, 12, 3),          write(2, 3, 12, 14, true),  // touches client 1's end: no overlap
  };
  const CheckResult r = check(history, options());
  ASSERT_EQ(r.overlaps.size(), 1u);
  const Overlap& o = r.overlaps[0];
  EXPECT_EQ(o.client_a, 0);
  EXPECT_EQ(o.token_a, 1u);
  EXPECT_EQ(o.client_b, 1);
  EXPECT_EQ(o.token_b, 2u);
  EXPECT_EQ(o.from, ms(7));
  EXPECT_EQ(o.to, ms(10));
  // Every write carried the highest token so far: the fence had nothing to reject.
  EXPECT_EQ(r.stale_accepted, 0);
  // An overlap is what the run measures, not a failure.
  EXPECT_TRUE(r.passed(options()));
  EXPECT_TRUE(starts_with(line_of(r, options(), "overlaps"), "INFO  overlaps          1"))
      << line_of(r, options(), "overlaps");
}

TEST(Checker, ASemaphoresRunCountsHoldsUnderWayAtOnceAgainstItsPermits) {
  CheckOptions o = options();
  o.permits = 2;
  // Two permits: clients 0 and 1 hold together (1..10, 2..8); client 2 begins at 5,
  // while both are under way — one hold beyond the permits. Client 3 begins at 10, just
  // as client 0's hold ends: an end and a start at one instant are one after the other.
  const std::vector<Event> history = {
      grant(0, 0, 1),  write(0, 1, 1, 10, true), grant(1, 1, 2),  write(1, 2, 2, 8, true),
      grant(2, 4, 3),  write(2, 3, 5, 9, true),  grant(3, 9, 4),  write(3, 4, 10, 12, true),
  };
  const CheckResult r = check(history, o);
  EXPECT_EQ(r.most_holders, 3);
  EXPECT_EQ(r.over_permits, 1);
  EXPECT_TRUE(r.overlaps.empty()) << "a semaphore's holders overlap by design";
  EXPECT_TRUE(starts_with(line_of(r, o, "holders"),
                          "INFO  holders           at most 3 at once of 2 permits; 1 holds"))
      << line_of(r, o, "holders");
  EXPECT_EQ(line_of(r, o, "overlaps"), "");

  // Within the permits, and recorded out of token order (client 1 reports its grant
  // last): nothing beyond them, and the order of the reports is not judged.
  const std::vector<Event> within = {
      grant(1, 2, 6), grant(0, 1, 7), write(0, 7, 1, 10, true), write(1, 6, 2, 8, true),
      grant(2, 11, 8), write(2, 8, 11, 12, true),
  };
  const CheckResult w = check(within, o);
  EXPECT_EQ(w.most_holders, 2);
  EXPECT_EQ(w.over_permits, 0);
  EXPECT_TRUE(w.passed(o));
  EXPECT_TRUE(starts_with(line_of(w, o, "tokens_backwards"), "INFO  ")) << line_of(w, o, "tokens_backwards");
  EXPECT_TRUE(starts_with(line_of(w, o, "stale_accepted"), "INFO  ")) << line_of(w, o, "stale_accepted");
}

TEST(Checker, DuplicateTokenLetsAStaleWriteThroughAndFails) {
  // The engine handed token 5 to two clients. Client 0 stalls before its first write,
  // client 1 writes, then client 0 wakes up: the fence admits equal tokens, so the old
  // holder's write gets through.
  const std::vector<Event> history = {
      grant(0, 0, 5),
      grant(1, 10, 5),
      write(1, 5, 11, 12, true),
      write(1, 5, 12, 13, true),  // the same grant again: fine
      write(0, 5, 14, 15, true),  // stale: a different grant with token 5 wrote first
  };
  const CheckResult r = check(history, options());
  EXPECT_EQ(r.stale_accepted, 1);
  EXPECT_EQ(r.tokens_backwards, 1);
  EXPECT_FALSE(r.passed(options()));
  EXPECT_TRUE(starts_with(line_of(r, options(), "stale_accepted"), "FAIL"))
      << line_of(r, options(), "stale_accepted");
}

TEST(Checker, LowerTokenAcceptedAfterAHigherOneIsStale) {
  const std::vector<Event> history = {
      grant(0, 0, 3),
      grant(1, 5, 4),
      write(1, 4, 6, 7, true),
      write(0, 3, 8, 9, true),  // an unfenced resource lets the old holder through
      write(0, 3, 10, 11, false),
  };
  const CheckResult r = check(history, options());
  EXPECT_EQ(r.stale_accepted, 1);
  EXPECT_EQ(r.writes_rejected, 1);
  EXPECT_FALSE(r.passed(options()));

  // An engine that does not claim fencing is measured, not failed, on tokens.
  CheckOptions unfenced = options();
  unfenced.fenced = false;
  EXPECT_TRUE(r.passed(unfenced));
  EXPECT_TRUE(starts_with(line_of(r, unfenced, "stale_accepted"), "INFO"))
      << line_of(r, unfenced, "stale_accepted");
}

TEST(Checker, TokensGoingBackwardsFail) {
  const std::vector<Event> history = {
      grant(0, 0, 7), release(0, 1, 7), grant(1, 2, 3), release(1, 3, 3),  // backwards: 3 after 7
      grant(2, 4, 8), release(2, 5, 8),
  };
  const CheckResult r = check(history, options());
  EXPECT_EQ(r.tokens_backwards, 1);
  EXPECT_FALSE(r.passed(options()));
  EXPECT_TRUE(
      starts_with(line_of(r, options(), "tokens_backwards"), "FAIL  tokens_backwards  1 of 3"))
      << line_of(r, options(), "tokens_backwards");
}

TEST(Checker, GrantsUnderWayAtOnceAreNotOrderedByWhenTheirClientsToldThem) {
  // Client 1 asked first and was granted 84; starved of the CPU, it recorded that after
  // client 2, who asked later, recorded 85. Neither client can see which grant came
  // first, so that is no token going backwards. A grant asked for after 85 was told is.
  const std::vector<Event> history = {
      request(1, 0), request(2, 1), grant(2, 5, 85), grant(1, 6, 84), release(1, 7, 84),
      release(2, 7, 85), request(0, 8), grant(0, 9, 80), release(0, 10, 80),
  };
  const CheckResult r = check(history, options());
  EXPECT_EQ(r.tokens_backwards, 1) << "only the grant of 80, asked for after 85 was told";
}

TEST(Checker, TokenGivenAgainToTheSameClientCountsAsBackwards) {
  const std::vector<Event> history = {
      grant(0, 0, 4), release(0, 1, 4), grant(0, 2, 4),
      release(0, 3, 4),  // the engine forgot it handed out 4
  };
  EXPECT_EQ(check(history, options()).tokens_backwards, 1);
}

std::vector<Event> kill_holder_run() {
  return {
      grant(0, 0, 1),    request(1, 50),      fault("kill-holder", "client 0", 0, 100, 100),
      death(0, 101),  // the kill's own effect: the same incident
      grant(1, 1100, 2), release(1, 1200, 2),
  };
}

TEST(Checker, KillHolderRecoveryWithinTheBoundPasses) {
  const CheckResult r = check(kill_holder_run(), options(1500));
  ASSERT_EQ(r.recoveries.size(), 1u);
  EXPECT_EQ(r.recoveries[0], ms(1000));  // from the fault's start to the next grant
  EXPECT_EQ(r.max_recovery, ms(1000));
  EXPECT_EQ(r.recoveries_unfinished, 0);
  EXPECT_EQ(r.waits_unfinished, 0);
  EXPECT_TRUE(r.passed(options(1500)));
}

TEST(Checker, KillHolderRecoveryOverTheBoundFails) {
  const CheckResult r = check(kill_holder_run(), options(900));
  EXPECT_EQ(r.max_recovery, ms(1000));
  EXPECT_FALSE(r.passed(options(900)));
  EXPECT_TRUE(starts_with(line_of(r, options(900), "recovery"), "FAIL"))
      << line_of(r, options(900), "recovery");
  EXPECT_NE(line_of(r, options(900), "recovery").find("max 1000.0 ms"), std::string::npos);
}

TEST(Checker, DeathOfAHolderWithoutAFaultIsAnIncident) {
  const std::vector<Event> history = {
      grant(0, 0, 1),
      death(0, 200),
      grant(1, 700, 2),
  };
  const CheckResult r = check(history, options());
  ASSERT_EQ(r.recoveries.size(), 1u);
  EXPECT_EQ(r.recoveries[0], ms(500));
}

TEST(Checker, FaultOnAClientThatHoldsNothingIsNoIncident) {
  const std::vector<Event> history = {
      grant(0, 0, 1),
      release(0, 10, 1),
      fault("pause-holder", "client 0", 0, 20, 500),
      grant(1, 600, 2),
  };
  const CheckResult r = check(history, options(100));
  EXPECT_EQ(r.faults, 1);
  EXPECT_TRUE(r.recoveries.empty());
  EXPECT_EQ(r.recoveries_unfinished, 0);
  EXPECT_TRUE(r.passed(options(100)));
}

TEST(Checker, FaultWithNoLaterGrantIsAnUnfinishedRecovery) {
  const std::vector<Event> history = {
      grant(0, 0, 1),
      fault("kill-holder", "client 0", 0, 100, 100),
      death(0, 100),
  };
  const CheckResult r = check(history, options());
  EXPECT_TRUE(r.recoveries.empty());
  EXPECT_EQ(r.recoveries_unfinished, 1);
  EXPECT_EQ(r.max_recovery, 0);
}

// A backend fault (a leader killed): from its start to the next grant to anyone,
// reported and not judged, whoever held the lock.
TEST(Checker, ABackendFaultsRecoveryIsTheTimeToTheNextGrant) {
  const std::vector<Event> history = {
      grant(0, 0, 1),
      fault("kill-leader", "master pid 7", -1, 100, 2500),
      grant(0, 3100, 2),  // the same client, again: the cell serves again
      fault("restart-cell", "every server", -1, 4000, 4100),
  };
  const CheckResult r = check(history, options(100));
  ASSERT_EQ(r.server_recoveries.size(), 1u);
  EXPECT_EQ(r.server_recoveries[0], ms(3000));
  EXPECT_EQ(r.max_server_recovery, ms(3000));
  EXPECT_EQ(r.server_recoveries_unfinished, 1);
  EXPECT_TRUE(r.recoveries.empty()) << "a backend fault is no client's incident";
  EXPECT_TRUE(r.passed(options(100)));
  const std::string line = line_of(r, options(100), "server_recovery");
  EXPECT_TRUE(starts_with(line, "INFO")) << line;
  EXPECT_NE(line.find("max 3000.0 ms over 1 backend faults"), std::string::npos) << line;
  EXPECT_NE(line.find("1 with no later grant"), std::string::npos) << line;
}

std::vector<Event> pause_holder_run(double lost_at) {
  return {
      grant(0, 0, 1),
      write(0, 1, 10, 20, true),
      fault("pause-holder", "client 0", 0, 100, 3000),
      request(1, 200),
      grant(1, 1500, 2),
      write(1, 2, 1510, 1520, true),
      lost(0, lost_at, 1),
      write(0, 1, 3000, 3001, false),  // the paused holder's late write, fenced off
      release(1, 3100, 2),
  };
}

TEST(Checker, PausedHolderToldOfItsLossBeforeTheNextGrant) {
  const CheckResult r = check(pause_holder_run(1200), options());
  EXPECT_EQ(r.lost_told, 1);
  EXPECT_EQ(r.lost_untold, 0);
  ASSERT_EQ(r.recoveries.size(), 1u);
  EXPECT_EQ(r.recoveries[0], ms(1400));
  EXPECT_EQ(r.stale_accepted, 0);
  EXPECT_TRUE(r.passed(options()));
}

TEST(Checker, PausedHolderToldOnlyAfterTheNextGrantIsUntold) {
  const CheckResult r = check(pause_holder_run(3001), options());
  EXPECT_EQ(r.lost_told, 0);
  EXPECT_EQ(r.lost_untold, 1);
  // Untold losses are reported, not failed: the fence kept the resource safe.
  EXPECT_TRUE(r.passed(options()));
  EXPECT_NE(line_of(r, options(), "lost").find("told 0, untold 1"), std::string::npos);
}

TEST(Checker, HolderThatNeverHearsOfItsLossIsUntold) {
  std::vector<Event> history = pause_holder_run(0);
  std::erase_if(history, [](const Event& e) { return e.kind == EventKind::lost; });
  const CheckResult r = check(history, options());
  EXPECT_EQ(r.lost_told, 0);
  EXPECT_EQ(r.lost_untold, 1);
}

TEST(Checker, UnansweredRequestOfALiveClientBeforeTheEndFails) {
  const std::vector<Event> history = {
      request(0, 10),                           // never answered: counts
      request(1, 150),                          // after the end of the run: fine
      request(2, 20),  death(2, 30),            // dead clients wait forever: fine
      request(3, 5),   timeout(3, 40),          // answered by a timeout
      request(4, 6),   error(4, 7, "refused"),  // answered by an error
  };
  const CheckOptions o = options(1500, 100);
  const CheckResult r = check(history, o);
  EXPECT_EQ(r.waits_unfinished, 1);
  EXPECT_FALSE(r.passed(o));
  EXPECT_TRUE(starts_with(line_of(r, o, "waits_unfinished"), "FAIL  waits_unfinished  1"))
      << line_of(r, o, "waits_unfinished");
}

}  // namespace
}  // namespace warden::torture
