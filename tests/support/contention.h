// support/contention.h — the fenced-counter contention run the engines' tests share: 32
// threads of 8 Clients take shared and exclusive turns on one lock. Writers increment
// a plain (non-atomic) counter behind a FenceGate; readers check that the counter
// stands still while they hold the lock and that no writer was admitted after them.
// Mutual exclusion holds exactly when the counter ends at the number of exclusive turns,
// with no overlap seen and no token rejected.
#pragma once

#include <cstdint>
#include <string>

namespace warden::testing {

struct ContentionResult {
  long exclusive_turns = 0;
  long shared_turns = 0;
  long want_exclusive = 0;  // turns the run asked for
  long want_shared = 0;
  long overlaps = 0;     // a writer overlapped another holder
  long rejected = 0;     // a stale token was used
  long stale_reads = 0;  // the counter moved under a reader
  long failures = 0;     // acquires that failed, timed out or were lost; failed releases
  std::uint64_t counter = 0;
  double seconds = 0;

  // "" if the run kept mutual exclusion and fencing and every turn happened; else what
  // went wrong, for a test's failure message.
  std::string problems() const;
};

// Runs the contention on lock (group, name) of the engine at `uri` (8 Clients of 4
// threads, 6 turns each, every fourth one shared); prints the turns and time.
ContentionResult run_fenced_contention(const std::string& uri, const std::string& group,
                                       const std::string& name);

}  // namespace warden::testing
