// torture/run.h — one `warden torture` run: a resource process, N client processes
// looping acquire → write with the token → hold → release against the engine at
// `url`, a nemesis injecting one kind of fault, and at the end the checker's verdict,
// the raw history and a timeline picture in the output directory:
//
//   history.jsonl   every event of the run (history.h), in time order
//   summary.txt     the verdict, one line per property (PASS / FAIL / INFO)
//   timeline.svg    one lane per client, holds, rejected writes, faults
//   row.md          the run as one row of docs/guarantees.md's table
//   client-N.log    each client's stderr; resource.log likewise
//
// Progress is printed to stderr once a second while the run lasts.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "torture/nemesis.h"
#include "torture/primitive.h"

namespace warden::torture {

struct TortureOptions {
  std::string url;
  int clients = 4;
  std::chrono::milliseconds duration{10'000};
  std::chrono::milliseconds ttl{1'000};
  Nemesis nemesis = Nemesis::none;
  std::uint64_t seed = 1;
  std::string out_dir;
  // Allowance on top of ttl + lock_delay for the engine to hand an abandoned lock on
  // (its documented epsilon: a poll interval, a session timeout's rounding).
  std::chrono::milliseconds epsilon{1'000};
  // For server faults: the backend's processes, and for each a shell command that
  // starts it again and prints the new PID.
  std::vector<pid_t> server_pids;
  std::vector<std::string> server_restart;
  // For failover: a shell command that prints the PID of the server process that is
  // the master now (one of server_pids).
  std::string master_command;
  // For partition-leader: a shell command run as `CMD cut PID` to cut the server process
  // PID off from the others (not from the clients), and `CMD heal PID` to undo it.
  std::string isolate_command;
  // The warden executable, started again as the resource and the clients.
  std::string self;
  // The engine's name in row.md (default: the URL's scheme).
  std::string label;
  // What the clients take, and a semaphore's number of permits.
  Primitive primitive = Primitive::lock;
  std::uint32_t permits = 2;
};

// Runs, prints the summary to stdout, and returns 0 if every property that must hold
// held, 1 if not. Throws std::runtime_error (or warden::Error when the engine cannot
// be opened) for a run that could not take place.
int run_torture(const TortureOptions& options);

}  // namespace warden::torture
