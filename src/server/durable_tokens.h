// server/durable_tokens.h — wardend's crash-safe fencing tokens and restart embargo.
//
// Two promises hold across a crash (kill -9, power loss), given a StateFile:
//
// 1. Fencing tokens never go backwards. Tokens come from one global sequence. The state
//    file holds a reservation R: "no token above R was handed out". next() hands out
//    only tokens <= the durable R; when the sequence reaches R it first makes
//    R' = R + block durable (one write, two fsyncs), so one grant in `block` pays for
//    the disk. After a restart the sequence continues at R + 1: whatever was left of the
//    last block is skipped, never reused.
//
// 2. After a restart, no lock is granted that may still be held from before the crash.
//    The state file holds max_hold: the longest ttl + lock_delay ever granted. A request
//    that could hold longer makes the new maximum durable *before* it may be granted
//    (note_hold). A server that started from an existing state refuses grants until
//    max_hold has passed since its start (Redlock's "delayed restart"): every lease
//    granted or renewed before the crash, and the lock-delay after it, has run out by
//    then, because the crash came before the restart. Tokens stay safe meanwhile.
//
// Why not log every grant and replay the table after a crash? The log would need an
// fsync before every grant, every release and every renewal (a renewal moves an expiry,
// and watchdogs renew every held lease each ttl/3), or group commit with its latency;
// plus replay code, compaction, and care for leases that expired while the server was
// down. Waiting out the longest lease needs no fsync per grant, two numbers on disk and
// one timer, and its safety argument fits in the paragraph above. Its cost is
// availability: after a crash of a server that had state, nobody gets a lock for
// max_hold — 30 s with the default ttl, but as long as the longest
// ttl + lock_delay any client ever asked for, since max_hold never decreases; bounding
// the ttl the server accepts bounds the window. Holders are not restored either: their
// renewals fail and their clients declare the leases lost, as after any server loss.
// A planned restart (SIGTERM) avoids both: the table written at the clean shutdown is
// restored and there is no embargo (clean_restart; server/table_snapshot.h).
//
// Clock rates: the embargo is measured on the restarted server's steady clock, leases on
// the clients' clocks from the send time of their last renewal. Clients already declare
// a lease lost ttl/100 + 20 ms early (core/watchdog.h) to absorb clock-rate drift; the
// same margin covers the embargo.
//
// Thread safety: none. Like the LockTable it feeds, a DurableTokens belongs to the one
// thread that drives the table (wardend's event loop).
#pragma once

#include <chrono>
#include <cstdint>

#include "server/state_file.h"
#include "table/lock_table.h"

namespace warden::server {

struct DurableTokensOptions {
  // Tokens reserved by one durable write; > 0. Larger: fewer fsyncs, more tokens
  // skipped after a crash (at most block - 1 per restart; of 2^64).
  std::uint64_t block = 10'000;
  // The previous run stopped cleanly and its table is restored (server/table_snapshot.h):
  // no restart embargo, since no lock can be held that the restored table does not show.
  bool clean_restart = false;
};

class DurableTokens final : public table::TokenSource {
 public:
  // Takes over an opened state file. `started` is the server's start time on the clock
  // the lock table runs on; the restart embargo counts from it. Throws
  // Error(invalid_argument) for block == 0.
  DurableTokens(StateFile file, table::Time started, DurableTokensOptions options = {});
  DurableTokens(const DurableTokens&) = delete;
  DurableTokens& operator=(const DurableTokens&) = delete;

  // The next token of the sequence (last() + 1), larger than every token handed out
  // before, by this object or by any earlier run on the same directory. When that token
  // is above the durable reservation, first makes a new reservation durable. If that
  // fails (disk full, I/O error, read-only directory) throws Error(unavailable), hands
  // out nothing, and the next call tries again. Throws Error(internal) when the 64-bit
  // sequence is exhausted.
  std::uint64_t next() override;

  // Call before any request with this ttl + lock_delay may be granted — also before it
  // is queued, since a queued request is granted later without another word — and
  // before a renewal with it (its ttl + the grant's lock_delay). If it exceeds the
  // durable max_hold, makes it the new max_hold before returning; otherwise does
  // nothing. On failure throws Error(unavailable) and the request must not be granted.
  // Values <= 0 are ignored.
  void note_hold(std::chrono::milliseconds ttl_plus_delay);

  // When grants may start: `started` + the max_hold found on disk at open (`started`
  // itself for a fresh state or a clean restart). Saturates at Time::max().
  table::Time embargo_until() const { return embargo_until_; }
  // true while grants must be refused: now < embargo_until().
  bool starting_up(table::Time now) const { return now < embargo_until_; }
  // How long grants must still be refused at `now`, rounded up to whole milliseconds;
  // zero once they are allowed.
  std::chrono::milliseconds embargo_left(table::Time now) const;

  // The last token handed out (0 before the first, in a fresh state).
  std::uint64_t last() const override { return last_; }
  // The durable record (reservation and max_hold) as of now.
  const StateRecord& durable() const { return file_.record(); }
  const StateFile& file() const { return file_; }

 private:
  StateFile file_;
  const std::uint64_t block_;
  const table::Time embargo_until_;
  std::uint64_t last_;
};

}  // namespace warden::server
