// cli/duration.h — durations on the command line: "500ms", "30s", "2m", "1h30m".
//
// Grammar (Go's time.ParseDuration without the sign):
//
//   duration := "0" | part+
//   part     := number unit
//   number   := digits | digits "." digits | digits "." | "." digits
//   unit     := "ns" | "us" | "ms" | "s" | "m" | "h"
//
// A bare number other than 0 is rejected: "30" could mean seconds or milliseconds, and
// a lock held 1000 times longer than meant is not a typo to guess at. Negative values,
// spaces and values beyond ~292 years (int64 nanoseconds) are rejected too.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace warden::cli {

// Thrown for text that is not a duration; what() says why and quotes the text.
class DurationError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Parses `text` as above. Fractions finer than a nanosecond are truncated.
// Throws DurationError.
std::chrono::nanoseconds parse_duration(std::string_view text);

// The exact value in milliseconds, for options the library counts in milliseconds.
// Throws DurationError if `d` has a sub-millisecond remainder (rounding a TTL or a
// lock-delay silently would change what the user asked for).
std::chrono::milliseconds whole_milliseconds(std::chrono::nanoseconds d);

// Shortest exact text that parse_duration() reads back: "0s", "250us", "1m30s".
std::string format_duration(std::chrono::nanoseconds d);

}  // namespace warden::cli
