// warden/sequencer.h — Chubby's sequencer: the proof of a grant that a holder passes
// to the resource it protects, as text "group/name:mode:token".
//
// The group cannot hold '/' and the mode and token cannot hold ':', so the text is
// parsed unambiguously even though a name may contain both.
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

  // Parses "group/name:mode:token". Throws Error(invalid_argument) on malformed text,
  // an invalid group or name, an unknown mode or a token that is not a decimal uint64.
  static Sequencer parse(std::string_view text);
  std::string str() const;

  friend bool operator==(const Sequencer&, const Sequencer&) = default;
};

}  // namespace warden
