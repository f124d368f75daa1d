// fuzz/history_fuzz.cc — fuzz target for the torture history reader, read_history
// (torture/history.h): what the checker and the timeline read back from history.jsonl.
//
// The input is the file's text. What must hold for any bytes:
//   - read_history returns events or throws std::runtime_error whose message names the
//     line ("history line N: ..."); nothing else escapes (no nlohmann exception);
//   - every event it accepts round-trips: writing the events and reading them back
//     gives the same events, and writing those again gives the same text.
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "torture/history.h"

namespace warden::torture {
namespace {

std::string written(const std::vector<Event>& events) {
  std::ostringstream out;
  for (const Event& e : events) write_event(out, e);
  return out.str();
}

std::vector<Event> read(const std::string& text) {
  std::istringstream in(text);
  return read_history(in);
}

void check(const std::string& input) {
  std::vector<Event> events;
  try {
    events = read(input);
  } catch (const std::runtime_error& e) {
    WARDEN_FUZZ_CHECK(std::string_view(e.what()).starts_with("history line "));
    return;
  }
  const std::string text = written(events);
  std::vector<Event> again;
  try {
    again = read(text);
  } catch (const std::runtime_error&) {
    WARDEN_FUZZ_CHECK(!"the written history of accepted events does not read back");
  }
  WARDEN_FUZZ_CHECK(again == events);
  WARDEN_FUZZ_CHECK(written(again) == text);
}

}  // namespace
}  // namespace warden::torture

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  warden::torture::check(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
