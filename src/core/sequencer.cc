#include "warden/sequencer.h"

#include <charconv>
#include <string>

#include "core/names.h"
#include "warden/error.h"

namespace warden {

Sequencer Sequencer::parse(std::string_view text) {
  auto bad = [&](const char* why) -> Error {
    return Error(Errc::invalid_argument,
                 "malformed sequencer '" + std::string(text) + "': " + why +
                     " (expected group/name:mode:token)");
  };
  // The group cannot hold '/', mode and token cannot hold ':': split on the first '/'
  // and the last two ':' so a name may hold either.
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) throw bad("no '/'");
  const auto last = text.rfind(':');
  if (last == std::string_view::npos || last < slash) throw bad("no ':token'");
  const auto middle = text.rfind(':', last - 1);
  if (middle == std::string_view::npos || middle < slash || last == 0) throw bad("no ':mode'");

  Sequencer s;
  s.group = std::string(text.substr(0, slash));
  s.name = std::string(text.substr(slash + 1, middle - slash - 1));
  const std::string_view mode = text.substr(middle + 1, last - middle - 1);
  const std::string_view token = text.substr(last + 1);
  core::validate_group(s.group);
  core::validate_name(s.name);
  if (mode == "exclusive") {
    s.mode = Mode::exclusive;
  } else if (mode == "shared") {
    s.mode = Mode::shared;
  } else {
    throw bad("mode is neither 'exclusive' nor 'shared'");
  }
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), s.token);
  if (token.empty() || ec != std::errc() || end != token.data() + token.size()) {
    throw bad("token is not a decimal 64-bit number");
  }
  return s;
}

std::string Sequencer::str() const {
  std::string out = group;
  out += '/';
  out += name;
  out += ':';
  out += to_string(mode);
  out += ':';
  out += std::to_string(token);
  return out;
}

}  // namespace warden
