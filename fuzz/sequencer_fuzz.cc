// fuzz/sequencer_fuzz.cc — fuzz target for Sequencer::parse (warden/sequencer.h), the
// text a holder hands to the resource it protects.
//
// The input is the text. What must hold for any bytes:
//   - parse returns a Sequencer or throws Error(invalid_argument); nothing else escapes;
//   - a parsed sequencer has a valid group and name (core/names.h), and its text form
//     round-trips: parse(s.str()) == s; the text is exactly the input unless the
//     token or the reuse was written with leading zeros (a reuse of 0 written out,
//     "+0", is one: its text form leaves it out);
//   - any sequencer built from the input's pieces (group and name as given, both modes,
//     a token) that passes validation also round-trips, so a name holding '/' or ':'
//     is never misread.
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/names.h"
#include "fuzz_check.h"
#include "warden/error.h"
#include "warden/sequencer.h"

namespace warden {
namespace {

void check_round_trip(const Sequencer& s) {
  const std::string text = s.str();
  try {
    WARDEN_FUZZ_CHECK(Sequencer::parse(text) == s);
  } catch (const Error&) {
    WARDEN_FUZZ_CHECK(!"a sequencer's own text does not parse");
  }
}

bool valid_identity(const std::string& group, const std::string& name) {
  try {
    core::validate_group(group);
    core::validate_name(name);
    return true;
  } catch (const Error& e) {
    WARDEN_FUZZ_CHECK(e.code() == Errc::invalid_argument);
    return false;
  }
}

// Splits the input in three at its first two NUL bytes (or wherever it ends) and
// builds sequencers from the parts, the way a client would before calling str().
void check_built(std::string_view input) {
  const auto first = input.find('\0');
  const std::string group(input.substr(0, first));
  std::string name;
  std::uint64_t token = 0;
  std::uint64_t reuse = 0;
  if (first != std::string_view::npos) {
    const std::string_view rest = input.substr(first + 1);
    const auto second = rest.find('\0');
    name = std::string(rest.substr(0, second));
    if (second != std::string_view::npos) {
      const std::string_view tail = rest.substr(second + 1);
      std::memcpy(&token, tail.data(), std::min(tail.size(), sizeof token));
      if (tail.size() > sizeof token) {
        std::memcpy(&reuse, tail.data() + sizeof token,
                    std::min(tail.size() - sizeof token, sizeof reuse));
      }
    }
  }
  if (!valid_identity(group, name)) return;
  for (const Mode mode : {Mode::exclusive, Mode::shared}) {
    check_round_trip(Sequencer{group, name, mode, token, reuse});
  }
}

}  // namespace
}  // namespace warden

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warden;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_built(text);
  Sequencer s;
  try {
    s = Sequencer::parse(text);
  } catch (const Error& e) {
    WARDEN_FUZZ_CHECK(e.code() == Errc::invalid_argument);
    return 0;
  }
  WARDEN_FUZZ_CHECK(valid_identity(s.group, s.name));
  check_round_trip(s);
  const std::string str = s.str();
  if (str != text) {
    // Only the digits of the token or the reuse may differ: "007" reads as 7, and
    // "+0" (or "+00") is the reuse the text form leaves out.
    const auto colon = text.rfind(':');
    WARDEN_FUZZ_CHECK(colon != std::string_view::npos &&
                      str.substr(0, str.rfind(':')) == text.substr(0, colon));
    const std::string_view digits = text.substr(colon + 1);
    const auto plus = digits.find('+');
    WARDEN_FUZZ_CHECK(digits.starts_with('0') ||
                      (plus != std::string_view::npos && digits.substr(plus + 1).starts_with('0')));
  }
  return 0;
}
