#include "cli/duration.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace warden::cli {
namespace {

using namespace std::chrono_literals;

TEST(ParseDuration, ReadsEveryUnit) {
  EXPECT_EQ(parse_duration("7ns"), 7ns);
  EXPECT_EQ(parse_duration("250us"), 250us);
  EXPECT_EQ(parse_duration("500ms"), 500ms);
  EXPECT_EQ(parse_duration("30s"), 30s);
  EXPECT_EQ(parse_duration("2m"), 2min);
  EXPECT_EQ(parse_duration("1h"), 1h);
}

TEST(ParseDuration, AddsUpCombinedParts) {
  EXPECT_EQ(parse_duration("1m30s"), 90s);
  EXPECT_EQ(parse_duration("1h2m3s4ms"), 1h + 2min + 3s + 4ms);
  EXPECT_EQ(parse_duration("1s1s"), 2s);  // as in Go: parts simply add up
}

TEST(ParseDuration, ReadsDecimalFractions) {
  EXPECT_EQ(parse_duration("1.5s"), 1500ms);
  EXPECT_EQ(parse_duration(".5s"), 500ms);
  EXPECT_EQ(parse_duration("2.s"), 2s);
  EXPECT_EQ(parse_duration("0.25h"), 15min);
  EXPECT_EQ(parse_duration("1.0000000001s"), 1s);  // below 1 ns: truncated
  EXPECT_EQ(parse_duration("0.333333333333333333333s"), 333333333ns);
}

TEST(ParseDuration, AcceptsZeroWithOrWithoutUnit) {
  EXPECT_EQ(parse_duration("0"), 0ns);
  EXPECT_EQ(parse_duration("0s"), 0ns);
  EXPECT_EQ(parse_duration("0ms"), 0ns);
  EXPECT_EQ(parse_duration("0.0h"), 0ns);
}

TEST(ParseDuration, AcceptsTheLargestValue) {
  EXPECT_EQ(parse_duration("9223372036854775807ns"), std::chrono::nanoseconds::max());
  EXPECT_EQ(parse_duration("2562047h"), 2562047h);
}

void expect_rejected(const std::string& text, const std::string& reason) {
  try {
    auto d = parse_duration(text);
    ADD_FAILURE() << '"' << text << "\" parsed as " << d.count() << "ns";
  } catch (const DurationError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find('"' + text + '"'), std::string::npos) << what;
    EXPECT_NE(what.find(reason), std::string::npos) << what;
  }
}

TEST(ParseDuration, RejectsANumberWithoutUnit) {
  expect_rejected("30", "missing unit");
  expect_rejected("1.5", "missing unit");
  expect_rejected("1m30", "missing unit");
  expect_rejected("00", "missing unit");
}

TEST(ParseDuration, RejectsNegativeAndSignedValues) {
  expect_rejected("-5s", "negative");
  expect_rejected("-0s", "negative");
  expect_rejected("+5s", "sign");
  expect_rejected("5s-1ms", "expected a number");
}

TEST(ParseDuration, RejectsOverflow) {
  expect_rejected("9223372036854775808ns", "too large");
  expect_rejected("2562048h", "too large");
  expect_rejected("99999999999999999999999s", "too large");
  expect_rejected("2562047h48m", "too large");
  expect_rejected("2562047.9h", "too large");
}

TEST(ParseDuration, RejectsGarbage) {
  expect_rejected("", "empty");
  expect_rejected("s", "expected a number");
  expect_rejected("abc", "expected a number");
  expect_rejected(".s", "expected a number");
  expect_rejected("5x", "unknown unit");
  expect_rejected("5sec", "unknown unit");
  expect_rejected("5S", "unknown unit");
  expect_rejected("5 s", "unknown unit");
  expect_rejected(" 5s", "expected a number");
  expect_rejected("5s ", "unknown unit");
  expect_rejected("1..5s", "missing unit");
  expect_rejected("forever", "expected a number");
}

TEST(WholeMilliseconds, KeepsExactMilliseconds) {
  EXPECT_EQ(whole_milliseconds(1500ms), 1500ms);
  EXPECT_EQ(whole_milliseconds(0ns), 0ms);
  EXPECT_EQ(whole_milliseconds(2h), 2h);
}

TEST(WholeMilliseconds, RejectsSubMillisecondRemainders) {
  EXPECT_THROW(whole_milliseconds(1500us), DurationError);
  EXPECT_THROW(whole_milliseconds(1ns), DurationError);
}

TEST(FormatDuration, IsShortestExactAndParsesBack) {
  EXPECT_EQ(format_duration(0ns), "0s");
  EXPECT_EQ(format_duration(250us), "250us");
  EXPECT_EQ(format_duration(5s), "5s");
  EXPECT_EQ(format_duration(90s), "1m30s");
  EXPECT_EQ(format_duration(1h + 1ns), "1h1ns");
  using std::chrono::nanoseconds;
  for (nanoseconds d : {nanoseconds(0), nanoseconds(1), nanoseconds(1500ms),
                        nanoseconds(1h + 2min + 3ms), nanoseconds::max()}) {
    EXPECT_EQ(parse_duration(format_duration(d)), d) << format_duration(d);
  }
}

}  // namespace
}  // namespace warden::cli
