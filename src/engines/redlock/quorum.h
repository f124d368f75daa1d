// engines/redlock/quorum.h — Redlock's arithmetic, with no I/O: how long a round may
// take, how much of a lease is left after one, how the masters' votes decide, and how
// the token is drawn from their answers. Unit-tested on its own
// (tests/unit/redlock_quorum_test.cc); docs/engines/redlock.md gives the reasoning.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "warden/types.h"

namespace warden::engines::redlock {

// Allowance for the masters' clocks running faster than the client's over a lease:
// 1 % of the TTL, plus 2 ms for the expiry's own granularity.
std::chrono::milliseconds clock_drift(std::chrono::milliseconds ttl);

// The bound of one round to the masters: node_timeout, but never more than a tenth of
// the lease (and at least 1 ms), so a slow master cannot eat the validity.
std::chrono::milliseconds round_timeout(std::chrono::milliseconds node_timeout,
                                        std::chrono::milliseconds ttl);

// What is left of a lease whose keys were set (or extended) by a round that took
// `elapsed`: ttl - elapsed - clock_drift(ttl). Not positive: the lease is worthless.
Clock::duration validity(std::chrono::milliseconds ttl, Clock::duration elapsed);

// The masters' answers to one round, for one lock.
struct Tally {
  std::size_t yes = 0;     // did it (set, extended, deleted, holds)
  std::size_t no = 0;      // answered that it would not (another's key, or none)
  std::size_t failed = 0;  // no answer: unreachable, timed out, an error reply

  std::size_t answered() const { return yes + no; }
};

enum class AcquireVerdict {
  granted,      // a quorum set our key
  held,         // a quorum holds someone else's key
  split,        // no quorum either way, but enough masters answered: contention
  unreachable,  // fewer than a quorum answered at all
};
AcquireVerdict judge_acquire(const Tally& tally, std::size_t masters);

enum class RenewVerdict {
  renewed,    // a quorum extended our key
  lost,       // so many masters said "not yours" that a quorum can no longer agree
  undecided,  // too few answers to tell: keep the old expiry and ask again soon
};
RenewVerdict judge_renew(const Tally& tally, std::size_t masters);

// Masters needed: N/2 + 1.
std::size_t quorum(std::size_t masters);

// One master's part of the token read (acquire.lua): the lock's last token there and
// the master's clock.
struct TokenRead {
  std::uint64_t last = 0;
  std::uint64_t clock_us = 0;
};

// The token of a grant whose votes read `reads` (a quorum of masters): one more than
// the largest of every last token and every clock. Any earlier grant wrote its token
// to a quorum, which shares a master with these reads, so the new token is larger.
std::uint64_t next_token(std::span<const TokenRead> reads);

}  // namespace warden::engines::redlock
