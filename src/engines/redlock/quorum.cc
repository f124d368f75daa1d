#include "engines/redlock/quorum.h"

#include <algorithm>

namespace warden::engines::redlock {

using std::chrono::milliseconds;

milliseconds clock_drift(milliseconds ttl) { return ttl / 100 + milliseconds(2); }

milliseconds round_timeout(milliseconds node_timeout, milliseconds ttl) {
  return std::max(milliseconds(1), std::min(node_timeout, ttl / 10));
}

Clock::duration validity(milliseconds ttl, Clock::duration elapsed) {
  return ttl - elapsed - clock_drift(ttl);
}

std::size_t quorum(std::size_t masters) { return masters / 2 + 1; }

AcquireVerdict judge_acquire(const Tally& tally, std::size_t masters) {
  const std::size_t q = quorum(masters);
  if (tally.yes >= q) return AcquireVerdict::granted;
  if (tally.no >= q) return AcquireVerdict::held;
  if (tally.yes + tally.no < q) return AcquireVerdict::unreachable;
  return AcquireVerdict::split;
}

RenewVerdict judge_renew(const Tally& tally, std::size_t masters) {
  const std::size_t q = quorum(masters);
  if (tally.yes >= q) return RenewVerdict::renewed;
  // The masters that have not said no are all that could still say yes.
  if (masters - tally.no < q) return RenewVerdict::lost;
  return RenewVerdict::undecided;
}

std::uint64_t next_token(std::span<const TokenRead> reads) {
  std::uint64_t top = 0;
  for (const TokenRead& read : reads) top = std::max({top, read.last, read.clock_us});
  return top + 1;
}

}  // namespace warden::engines::redlock
