// torture/checker.h — the properties a `warden torture` run is judged by, computed from
// its history alone (no I/O, no clocks): the same code judges a live run and a
// hand-written history in the unit tests.
//
//   overlaps            pairs of holds of different grants that overlapped as the
//                       resource saw them: a hold is [first write's start, last write's
//                       end] of one grant (client, token). Unfenced mutual-exclusion
//                       violations: what a resource without a fence would have suffered.
//   stale_accepted      writes the fence let through although the resource had already
//                       accepted a write of a *different* grant with a token >= theirs.
//                       Must be 0 on every engine that claims fencing.
//   tokens_backwards    grants (in order of their grant time) whose token is not larger
//                       than that of every grant made earlier: to someone else (an
//                       equal token counts), or again to the same client.
//   recovery            for every fault on a client (Event::client >= 0) that hit it
//                       while it held the lock, and every death of a holder no such
//                       fault on the same hold explains, the time from the fault's start
//                       (the death) to the next grant to any other client (none: the run
//                       ended first, reported apart). Judged against a bound = ttl +
//                       lock_delay + epsilon. A client holds from its grant to its
//                       release, lost event or death, by its own events.
//   server recovery     for every fault on the backend (Event::client < 0): the time
//                       from its start to the next grant to any client (a failover's
//                       recovery: kill to the next grant). Reported, not judged: how
//                       long a backend may take to come back is the engine's figure.
//   lost_told / lost_untold
//                       holders whose grant was followed by an overlapping grant to
//                       another client, i.e. one before the holder's release or death:
//                       told = a lost event for that grant arrived no later than the
//                       other grant, untold = not (or never). Each grant counts once.
//   waits_unfinished    requests with no grant, timeout or error after them by the end
//                       of the run, from clients with no death event.
//   holders             a semaphore's run (CheckOptions::permits > 0) only: the most
//                       holds under way at once at the resource, and how many holds
//                       began while `permits` others were under way (over_permits). It
//                       takes the place of overlaps, which a semaphore's holders have by
//                       design; stale_accepted, tokens_backwards and the lost counts are
//                       not judged (the resource admits every write, clients record
//                       overlapping grants in no particular order, and other grants are
//                       not successors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "torture/history.h"

namespace warden::torture {

struct CheckOptions {
  Nanos recovery_bound = 0;  // ttl + lock_delay + the engine's epsilon
  Nanos run_end = 0;         // when the clients were told to stop (requests after it may go
                             // unanswered); 0: unknown, every unanswered request counts
  bool fenced = true;        // the engine claims fencing: stale_accepted must be 0
  std::uint32_t permits = 0;  // a semaphore's run: its number of permits; 0: a lock's or
                              // an election's run (one holder at a time)
};

struct Overlap {
  int client_a = -1, client_b = -1;
  std::uint64_t token_a = 0, token_b = 0;
  Nanos from = 0, to = 0;  // the overlapping stretch
};

struct CheckResult {
  long grants = 0;
  long writes = 0;
  long writes_rejected = 0;
  long faults = 0;
  std::vector<Overlap> overlaps;
  long stale_accepted = 0;
  long tokens_backwards = 0;
  std::vector<Nanos> recoveries;   // one per fault that hit a holder and was followed by a grant
  long recoveries_unfinished = 0;  // faults on a holder with no later grant to another client
  Nanos max_recovery = 0;
  std::vector<Nanos> server_recoveries;   // one per backend fault followed by a grant
  long server_recoveries_unfinished = 0;  // backend faults with no grant after them
  Nanos max_server_recovery = 0;
  long lost_told = 0;
  long lost_untold = 0;
  long waits_unfinished = 0;
  long most_holders = 0;   // the most holds under way at once (resource side)
  long over_permits = 0;   // holds that began while `permits` others were under way

  // One line per property: "PASS  name  detail" / "FAIL  name  detail" / "INFO ...".
  // Properties that must hold: stale_accepted == 0 (when fenced), tokens_backwards == 0
  // (when fenced), max_recovery <= bound, waits_unfinished == 0. Overlaps and untold
  // losses are reported (INFO), not failed: they are what the run measures.
  std::vector<std::string> summary(const CheckOptions& options) const;
  bool passed(const CheckOptions& options) const;
};

CheckResult check(const std::vector<Event>& history, const CheckOptions& options);

}  // namespace warden::torture
