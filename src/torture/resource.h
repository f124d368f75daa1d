// torture/resource.h — the shared thing a `warden torture` run's clients write to: a
// process of its own that keeps a FenceGate for the lock and records every write as
// it saw it.
//
// Clients talk to it over a Unix stream socket, one line per request:
//
//   BEGIN CLIENT TOKEN   a holder starts writing: the gate admits TOKEN or not
//                        -> "OK" | "REJECTED"
//   END CLIENT TOKEN     the write ends: the gate is asked again (a real store checks
//                        the token at commit) -> "OK" | "REJECTED"
//   HOLDER               the client of the write begun last and not ended, or -1
//   STATS                "WRITES REJECTED": writes recorded and rejected so far
//
// A write is recorded when it ends — at END, or when its client's connection closes
// (the client died mid-write) — as a `write` event: start and end as the resource saw
// them, accepted iff the gate admitted it at both ends. Anything else on a line gets
// "ERR ..." and changes nothing.
#pragma once

#include <string>

namespace warden::torture {

struct ResourceOptions {
  std::string socket_path;   // created here; removed on exit
  std::string history_path;  // the write events, JSON lines
  // false for a semaphore's run: its holders write at once, each with its own token, so
  // no single "highest token seen" applies; every write is admitted and the checker
  // counts how many were under way at once.
  bool fenced = true;
};

// Serves until SIGTERM or SIGINT, then writes out every write still open (ended at
// that moment) and returns 0. Throws std::runtime_error if the socket cannot be set up.
int run_resource(const ResourceOptions& options);

}  // namespace warden::torture
