// engines/resp_client/fan_out.h — one round of commands to several servers at once
// (Redlock's masters): every server's commands are written before any reply is
// awaited, and replies are read as they arrive, so a round lasts as long as its
// slowest server, bounded by one deadline — not the sum of the servers' round trips.
//
// A server that cannot be reached, fails mid-round or does not answer by the deadline
// fails its own leg only; fan_out never throws for a leg.
//
// Connections come from each server's Pool and go back after the round; one whose
// replies did not all arrive is closed (abandon()), so a late reply never answers a
// later request, and its server becomes suspect (Connector::suspect): later rounds
// skip it at once until its back-off passes, and an answer clears it.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "engines/resp_client/connection.h"
#include "engines/resp_client/pool.h"
#include "engines/resp_client/reply.h"
#include "warden/error.h"
#include "warden/types.h"

namespace warden::engines::resp_client {

// One server's part of a round.
struct Leg {
  Pool* pool = nullptr;           // the server's connections
  std::vector<Command> commands;  // none: the leg is skipped (and ok())

  // Filled by fan_out: one reply per command (error replies included) when ok(),
  // otherwise why the leg failed (the commands may or may not have run).
  std::vector<Reply> replies;
  std::optional<Error> error;
  bool ok() const { return !error && replies.size() == commands.size(); }
};

// Whether the legs answered so far already decide the round (Redlock: a quorum said
// yes); legs still under way are then not waited for.
using Enough = std::function<bool(std::span<const Leg> legs)>;

// Runs every leg's commands on a connection of its pool, all at once, and returns when
// each leg has all its replies or has failed: unavailable (no connection, a transport
// failure), permission_denied (a new connection's AUTH refused), or deadline_exceeded
// (no free connection, or not every reply, by `deadline`). If `enough` is given and
// says so after some replies arrived, the legs still waiting get a grace as long as the
// round took so far, and at least a quarter of the time to `deadline` — healthy servers
// answer within it, so their connections stay in step and go back to the pool — and
// then fail with deadline_exceeded ("not waited for"): their commands were sent and may
// still run.
void fan_out(std::span<Leg> legs, Clock::time_point deadline, const Enough& enough = {});

}  // namespace warden::engines::resp_client
