#include "warden/sequencer.h"

#include <charconv>
#include <string>

#include "core/names.h"
#include "warden/error.h"

namespace warden {
namespace {

bool decimal(std::string_view text, std::uint64_t& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

Sequencer Sequencer::parse(std::string_view text) {
  auto bad = [&](const char* why) -> Error {
    return Error(Errc::invalid_argument,
                 "malformed sequencer '" + std::string(text) + "': " + why +
                     " (expected group/name:mode:token or group/name:mode:token+reuse)");
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
  std::string_view token = text.substr(last + 1);
  std::string_view reuse;
  if (const auto plus = token.find('+'); plus != std::string_view::npos) {
    reuse = token.substr(plus + 1);
    token = token.substr(0, plus);
    if (!decimal(reuse, s.reuse)) throw bad("reuse is not a decimal 64-bit number");
  }
  core::validate_group(s.group);
  core::validate_name(s.name);
  if (mode == "exclusive") {
    s.mode = Mode::exclusive;
  } else if (mode == "shared") {
    s.mode = Mode::shared;
  } else {
    throw bad("mode is neither 'exclusive' nor 'shared'");
  }
  if (!decimal(token, s.token)) throw bad("token is not a decimal 64-bit number");
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
  if (reuse != 0) {
    out += '+';
    out += std::to_string(reuse);
  }
  return out;
}

}  // namespace warden
