// warden/sequencer.h — Chubby's sequencer: the proof of a grant that a holder passes
// to the resource it protects, as text "group/name:mode:token", or
// "group/name:mode:token+reuse" for a hold served from the client's lock cache.
//
// The group cannot hold '/' and the mode and token cannot hold ':', so the text is
// parsed unambiguously even though a name may contain both.
//
// `reuse` tells the holds of one cached grant apart (LockOptions::cache): the grant
// stands on the backend across unlock() and the next acquire, so its token does not
// change; reuse is 0 for the hold the backend granted and n for the n-th re-acquire from
// the cache. Fences compare (token, reuse) in that order (FenceGate), so a write delayed
// from before an unlock() is rejected once a later hold's write was admitted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "warden/types.h"

namespace warden {

struct Sequencer {
  std::string group;
  std::string name;
  Mode mode = Mode::exclusive;
  std::uint64_t token = 0;
  std::uint64_t reuse = 0;

  // Parses "group/name:mode:token" or "group/name:mode:token+reuse". Throws
  // Error(invalid_argument) on malformed text, an invalid group or name, an unknown mode
  // or a token (or reuse) that is not a decimal uint64.
  static Sequencer parse(std::string_view text);
  std::string str() const;

  friend bool operator==(const Sequencer&, const Sequencer&) = default;
};

}  // namespace warden
