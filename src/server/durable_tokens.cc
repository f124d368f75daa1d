// server/durable_tokens.cc — reservations of token blocks and the durable max_hold.
#include "server/durable_tokens.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "warden/error.h"

namespace warden::server {
namespace {

constexpr std::uint64_t kMaxToken = std::numeric_limits<std::uint64_t>::max();

// started + ms, or Time::max() if that does not fit (a max_hold of centuries read
// from disk must not wrap around into the past).
table::Time add_saturating(table::Time started, std::uint64_t ms) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const auto room = duration_cast<milliseconds>(table::Time::max() - started).count();
  if (room <= 0 || ms >= static_cast<std::uint64_t>(room)) return table::Time::max();
  return started + milliseconds(static_cast<milliseconds::rep>(ms));
}

std::uint64_t check_block(std::uint64_t block) {
  if (block == 0) throw Error(Errc::invalid_argument, "token block size must be > 0");
  return block;
}

}  // namespace

DurableTokens::DurableTokens(StateFile file, table::Time started, DurableTokensOptions options)
    : file_(std::move(file)),
      block_(check_block(options.block)),
      embargo_until_(options.clean_restart ? started
                                           : add_saturating(started, file_.record().max_hold_ms)),
      // Tokens up to the reservation may have been handed out before a crash: skip them.
      last_(file_.record().reserved_upto) {}

std::uint64_t DurableTokens::next() {
  if (last_ == kMaxToken) {
    throw Error(Errc::internal,
                "the fencing token sequence in '" + file_.dir().string() + "' is exhausted");
  }
  const std::uint64_t token = last_ + 1;
  if (token > file_.record().reserved_upto) {
    StateRecord grown = file_.record();
    grown.reserved_upto = last_ + std::min(block_, kMaxToken - last_);
    file_.store(grown);  // throws Error(unavailable) before anything is handed out
  }
  last_ = token;
  return token;
}

void DurableTokens::note_hold(std::chrono::milliseconds ttl_plus_delay) {
  if (ttl_plus_delay.count() <= 0) return;
  const auto ms = static_cast<std::uint64_t>(ttl_plus_delay.count());
  if (ms <= file_.record().max_hold_ms) return;
  StateRecord grown = file_.record();
  grown.max_hold_ms = ms;
  file_.store(grown);
}

std::chrono::milliseconds DurableTokens::embargo_left(table::Time now) const {
  if (now >= embargo_until_) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(embargo_until_ - now);
}

}  // namespace warden::server
