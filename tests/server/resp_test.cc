#include "server/resp.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace warden::server::resp {
namespace {

using namespace std::string_literals;
using Args = std::vector<std::string>;

Args strings(const std::vector<std::string_view>& views) { return {views.begin(), views.end()}; }

// Parses `buffer` as one complete request and returns its arguments; checks that the
// request took exactly `buffer`.
Args parse_whole(std::string_view buffer, const Limits& limits = {}) {
  const Parsed p = parse_request(buffer, limits);
  EXPECT_EQ(p.status, Status::complete) << p.error;
  EXPECT_EQ(p.consumed, buffer.size());
  EXPECT_EQ(p.error, "");
  return strings(p.args);
}

// Every request in `buffer`, the caller's loop: skipped requests show as empty Args.
// Returns what was left unconsumed in `rest`.
std::vector<Args> parse_all(std::string_view buffer, std::string_view* rest = nullptr,
                            const Limits& limits = {}) {
  std::vector<Args> requests;
  while (true) {
    const Parsed p = parse_request(buffer, limits);
    if (p.status != Status::complete) break;
    EXPECT_GT(p.consumed, 0u);
    requests.push_back(strings(p.args));
    buffer.remove_prefix(p.consumed);
  }
  if (rest != nullptr) *rest = buffer;
  return requests;
}

void expect_error(std::string_view buffer, std::string_view why, const Limits& limits = {}) {
  const Parsed p = parse_request(buffer, limits);
  EXPECT_EQ(p.status, Status::error) << testing::PrintToString(std::string(buffer));
  EXPECT_EQ(p.consumed, 0u);
  EXPECT_TRUE(p.args.empty());
  EXPECT_EQ(p.error, "Protocol error: "s + std::string(why));
}

void expect_incomplete(std::string_view buffer, const Limits& limits = {}) {
  const Parsed p = parse_request(buffer, limits);
  EXPECT_EQ(p.status, Status::incomplete) << testing::PrintToString(std::string(buffer));
  EXPECT_EQ(p.consumed, 0u);
  EXPECT_TRUE(p.args.empty());
  EXPECT_EQ(p.error, "");
}

// The wire form of `args` as a request array.
std::string encode(const Args& args) {
  std::string out;
  array(out, args.size());
  for (const auto& a : args) bulk(out, a);
  return out;
}

// --- Arrays of bulk strings ---

TEST(ParseRequest, ReadsAnArrayOfBulkStrings) {
  EXPECT_EQ(parse_whole("*3\r\n$7\r\nACQUIRE\r\n$3\r\na/b\r\n$1\r\nx\r\n"),
            (Args{"ACQUIRE", "a/b", "x"}));
  EXPECT_EQ(parse_whole("*1\r\n$4\r\nPING\r\n"), (Args{"PING"}));
}

TEST(ParseRequest, ReadsEmptyBulkStrings) {
  EXPECT_EQ(parse_whole("*2\r\n$4\r\nPING\r\n$0\r\n\r\n"), (Args{"PING", ""}));
}

TEST(ParseRequest, ArgsAreViewsIntoTheBuffer) {
  const std::string buffer = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
  const Parsed p = parse_request(buffer, {});
  ASSERT_EQ(p.status, Status::complete);
  ASSERT_EQ(p.args.size(), 2u);
  EXPECT_EQ(p.args[0].data(), buffer.data() + 8);
  EXPECT_EQ(p.args[1].data(), buffer.data() + 17);
}

TEST(ParseRequest, BulkStringsAreBinarySafe) {
  const Args args{"a\0b"s, "\r\n", "$3\r\n", "*1\r\n", "\n", "\r", std::string(300, '\0')};
  EXPECT_EQ(parse_whole(encode(args)), args);
}

TEST(ParseRequest, EmptyArrayIsSkipped) {
  EXPECT_EQ(parse_whole("*0\r\n"), Args{});
  EXPECT_EQ(parse_all("*0\r\n*1\r\n$4\r\nPING\r\n"), (std::vector<Args>{{}, {"PING"}}));
}

TEST(ParseRequest, NilArrayIsSkipped) {
  EXPECT_EQ(parse_whole("*-1\r\n"), Args{});
  EXPECT_EQ(parse_all("*-1\r\nPING\r\n"), (std::vector<Args>{{}, {"PING"}}));
}

// --- Inline commands ---

TEST(ParseRequest, ReadsAnInlineCommandEndingInCrlf) {
  EXPECT_EQ(parse_whole("ACQUIRE a/b exclusive 30000\r\n"),
            (Args{"ACQUIRE", "a/b", "exclusive", "30000"}));
}

TEST(ParseRequest, ReadsAnInlineCommandEndingInLf) {
  EXPECT_EQ(parse_whole("PING hello\n"), (Args{"PING", "hello"}));
}

TEST(ParseRequest, InlineWordsAreSeparatedByRunsOfSpacesTabsAndCrs) {
  EXPECT_EQ(parse_whole("  RELEASE\t a/b \t\t 7  \r\n"), (Args{"RELEASE", "a/b", "7"}));
  EXPECT_EQ(parse_whole("PING\ra\r\r\n"), (Args{"PING", "a"}));
}

TEST(ParseRequest, InlineQuotesAreNotInterpreted) {
  EXPECT_EQ(parse_whole("PING \"a b\"\n"), (Args{"PING", "\"a", "b\""}));
}

TEST(ParseRequest, InlineLineMayStartWithAnyByteButStar) {
  EXPECT_EQ(parse_whole("$3\r\n"), (Args{"$3"}));
  EXPECT_EQ(parse_whole("+PING\r\n"), (Args{"+PING"}));
  EXPECT_EQ(parse_whole("a\0b c\n"s), (Args{"a\0b"s, "c"}));
}

TEST(ParseRequest, EmptyInlineLineIsSkipped) {
  EXPECT_EQ(parse_whole("\r\n"), Args{});
  EXPECT_EQ(parse_whole("\n"), Args{});
  EXPECT_EQ(parse_whole(" \t \r\n"), Args{});
  EXPECT_EQ(parse_all("\r\n\nPING\r\n"), (std::vector<Args>{{}, {}, {"PING"}}));
}

TEST(ParseRequest, InlineLineWithoutLfIsIncomplete) {
  expect_incomplete("PING");
  expect_incomplete("PING\r");
  expect_incomplete(" ");
}

// --- Incomplete input ---

TEST(ParseRequest, EmptyBufferIsIncomplete) { expect_incomplete(""); }

TEST(ParseRequest, EveryProperPrefixOfARequestIsIncomplete) {
  const std::string request = "*3\r\n$5\r\nRENEW\r\n$3\r\na/b\r\n$2\r\n12\r\n";
  for (std::size_t n = 0; n < request.size(); ++n) {
    SCOPED_TRACE(n);
    expect_incomplete(std::string_view(request).substr(0, n));
  }
}

TEST(ParseRequest, IncompleteDoesNotWaitForBytesItCanRejectAlready) {
  expect_error("*1\r\n$3\r\nabcX", "bulk data not ended by CRLF");
  expect_error("*1\r\n$3\r\nabc\rX", "bulk data not ended by CRLF");
  expect_error("*1\r\n:", "expected '$', got ':'");
  expect_error("*1x", "invalid multibulk length");
  expect_error("*1\r\n$1x", "invalid bulk length");
}

// --- Pipelining ---

TEST(ParseRequest, PipelinedRequestsParseOneAtATime) {
  const std::string buffer =
      "*1\r\n$4\r\nPING\r\n"
      "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n"
      "INFO\r\n"
      "*1\r\n$4\r\nQU";
  std::string_view rest;
  EXPECT_EQ(parse_all(buffer, &rest), (std::vector<Args>{{"PING"}, {"PING", "hi"}, {"INFO"}}));
  EXPECT_EQ(rest, "*1\r\n$4\r\nQU");
}

TEST(ParseRequest, ConsumedStopsAtTheEndOfTheFirstRequest) {
  const Parsed p = parse_request("*1\r\n$4\r\nPING\r\ngarbage", {});
  EXPECT_EQ(p.status, Status::complete);
  EXPECT_EQ(p.consumed, 14u);
}

// Feeds growing prefixes of `wire`, as reads of any size would, and collects requests.
std::vector<Args> parse_split(std::string_view wire, std::size_t first, std::size_t second) {
  std::vector<Args> requests;
  std::string buffer;
  const std::size_t cuts[] = {first, second, wire.size()};
  std::size_t fed = 0;
  for (const std::size_t cut : cuts) {
    buffer.append(wire.substr(fed, cut - fed));
    fed = cut;
    while (true) {
      const Parsed p = parse_request(buffer, {});
      EXPECT_NE(p.status, Status::error) << p.error;
      if (p.status != Status::complete) break;
      requests.push_back(strings(p.args));
      buffer.erase(0, p.consumed);
    }
  }
  EXPECT_EQ(buffer, "");
  return requests;
}

TEST(ParseRequest, EverySplitOfAPipelineYieldsTheSameRequests) {
  const std::string wire =
      "*4\r\n$7\r\nACQUIRE\r\n$3\r\na/b\r\n$1\r\nx\r\n$5\r\n30000\r\n"
      "PING\r\n"
      "*0\r\n"
      "\n"
      "*2\r\n$4\r\nPING\r\n$4\r\na\r\nb\r\n"
      "*-1\r\n"
      "RELEASE a/b 1\n"
      "*1\r\n$0\r\n\r\n";
  const std::vector<Args> expected{
      {"ACQUIRE", "a/b", "x", "30000"}, {"PING"}, {}, {}, {"PING", "a\r\nb"}, {},
      {"RELEASE", "a/b", "1"},          {""}};
  for (std::size_t first = 0; first <= wire.size(); ++first) {
    for (std::size_t second = first; second <= wire.size(); ++second) {
      SCOPED_TRACE(testing::Message() << "split at " << first << " and " << second);
      ASSERT_EQ(parse_split(wire, first, second), expected);
    }
  }
}

// --- Malformed framing ---

TEST(ParseRequest, ElementThatIsNotABulkStringIsAnError) {
  expect_error("*1\r\n:5\r\n", "expected '$', got ':'");
  expect_error("*1\r\n+OK\r\n", "expected '$', got '+'");
  expect_error("*2\r\n$4\r\nPING\r\nhi\r\n", "expected '$', got 'h'");
  expect_error("*1\r\n\r\n", "expected '$', got '\\x0d'");
}

TEST(ParseRequest, NestedArrayIsAnError) {
  expect_error("*1\r\n*1\r\n$4\r\nPING\r\n", "expected '$', got '*'");
}

TEST(ParseRequest, NegativeBulkLengthIsAnError) {
  expect_error("*1\r\n$-1\r\n", "invalid bulk length");
  expect_error("*1\r\n$-5\r\nabc\r\n", "invalid bulk length");
}

TEST(ParseRequest, NegativeArrayCountOtherThanMinusOneIsAnError) {
  expect_error("*-2\r\n", "invalid multibulk length");
  expect_error("*-0\r\n", "invalid multibulk length");
  expect_error("*-10\r\n", "invalid multibulk length");
  expect_error("*--1\r\n", "invalid multibulk length");
}

TEST(ParseRequest, NonNumericCountIsAnError) {
  expect_error("*x\r\n", "invalid multibulk length");
  expect_error("*\r\n", "invalid multibulk length");
  expect_error("* 1\r\n", "invalid multibulk length");
  expect_error("*+1\r\n", "invalid multibulk length");
  expect_error("*1 \r\n", "invalid multibulk length");
  expect_error("*01\r\n", "invalid multibulk length");
  expect_error("*1\n$4\r\nPING\r\n", "invalid multibulk length");
  expect_error("*1\rx", "invalid multibulk length");
}

TEST(ParseRequest, NonNumericBulkLengthIsAnError) {
  expect_error("*1\r\n$x\r\n", "invalid bulk length");
  expect_error("*1\r\n$\r\n\r\n", "invalid bulk length");
  expect_error("*1\r\n$4x\r\nPING\r\n", "invalid bulk length");
  expect_error("*1\r\n$+4\r\nPING\r\n", "invalid bulk length");
  expect_error("*1\r\n$04\r\nPING\r\n", "invalid bulk length");
  expect_error("*1\r\n$4\nPING\r\n", "invalid bulk length");
}

TEST(ParseRequest, ZeroIsWrittenWithOneDigit) {
  EXPECT_EQ(parse_whole("*1\r\n$0\r\n\r\n"), (Args{""}));
  expect_error("*1\r\n$00\r\n\r\n", "invalid bulk length");
  expect_error("*00\r\n", "invalid multibulk length");
}

TEST(ParseRequest, OverflowingLengthIsAnError) {
  expect_error("*9223372036854775808\r\n", "invalid multibulk length");
  expect_error("*1\r\n$9223372036854775808\r\n", "invalid bulk length");
  expect_error("*1\r\n$99999999999999999999999999", "invalid bulk length");
  // Within int64, but far beyond any limit.
  expect_error("*9223372036854775807\r\n", "more than 2056 arguments");
  expect_error("*1\r\n$9223372036854775807\r\n", "request larger than 65536 bytes");
}

TEST(ParseRequest, MissingCrlfAfterBulkDataIsAnError) {
  expect_error("*1\r\n$4\r\nPINGPING\r\n", "bulk data not ended by CRLF");
  expect_error("*1\r\n$4\r\nPIN\r\n", "bulk data not ended by CRLF");
  expect_error("*1\r\n$4\r\nPING\n\r", "bulk data not ended by CRLF");
  expect_error("*2\r\n$4\r\nPING\r\n$1\r\nab\r\n", "bulk data not ended by CRLF");
}

// --- Limits ---

TEST(ParseRequest, AcceptsMaxArgsArguments) {
  const Limits limits{.max_request_bytes = 1024, .max_args = 3};
  EXPECT_EQ(parse_whole(encode({"a", "b", "c"}), limits), (Args{"a", "b", "c"}));
  EXPECT_EQ(parse_whole("a b c\r\n", limits), (Args{"a", "b", "c"}));
}

TEST(ParseRequest, MoreThanMaxArgsIsAnErrorBeforeTheArgumentsArrive) {
  const Limits limits{.max_request_bytes = 1024, .max_args = 3};
  expect_error("*4\r\n", "more than 3 arguments", limits);
  expect_error("a b c d\r\n", "more than 3 arguments", limits);
  expect_error("*2057\r\n", "more than 2056 arguments");
}

TEST(ParseRequest, RequestOfExactlyMaxBytesIsAccepted) {
  const Limits limits{.max_request_bytes = 32, .max_args = 16};
  // 4 + 4 + 4 + 2 + 5 + 11 + 2 = 32 bytes.
  const std::string array = "*2\r\n$4\r\nPING\r\n$11\r\n" + std::string(11, 'x') + "\r\n";
  ASSERT_EQ(array.size(), 32u);
  EXPECT_EQ(parse_whole(array, limits).size(), 2u);
  const std::string line = "PING " + std::string(25, 'x') + "\r\n";
  ASSERT_EQ(line.size(), 32u);
  EXPECT_EQ(parse_whole(line, limits).size(), 2u);
}

TEST(ParseRequest, DeclaredLengthOverTheLimitIsAnErrorBeforeTheDataArrives) {
  const Limits limits{.max_request_bytes = 32, .max_args = 16};
  expect_error("*2\r\n$4\r\nPING\r\n$12\r\n", "request larger than 32 bytes", limits);
  expect_error("*1\r\n$70000\r\n", "request larger than 65536 bytes");
  expect_error("*1\r\n$65536\r\n", "request larger than 65536 bytes");
}

TEST(ParseRequest, DeclaredCountCountsTheSmallestPossibleElements) {
  // Three elements need at least 4 + 3 * 6 = 22 bytes.
  EXPECT_EQ(parse_whole("*3\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n", {22, 16}), (Args{"", "", ""}));
  expect_error("*3\r\n", "request larger than 21 bytes", {21, 16});
  // The elements after a bulk length still need their six bytes each.
  expect_error("*3\r\n$1\r\n", "request larger than 22 bytes", {22, 16});
}

TEST(ParseRequest, HeadersAloneOverTheLimitAreAnError) {
  expect_error("*1\r\n", "request larger than 3 bytes", {3, 16});
  expect_error("*1\r\n$1000\r\n", "request larger than 10 bytes", {10, 16});
  expect_error("*1\r\n$10000\r\n", "request larger than 12 bytes", {12, 16});
}

TEST(ParseRequest, UnterminatedInlineLineIsAnErrorAtTheLimit) {
  const Limits limits{.max_request_bytes = 32, .max_args = 16};
  expect_incomplete(std::string(31, 'x'), limits);
  expect_error(std::string(32, 'x'), "request larger than 32 bytes", limits);
  expect_error(std::string(31, 'x') + "\r\n", "request larger than 32 bytes", limits);
  expect_error(std::string(100, 'x') + "\n", "request larger than 32 bytes", limits);
}

TEST(ParseRequest, IncompleteArrayFillingTheLimitIsAnError) {
  // Still typing a long header at the limit: it cannot end within it.
  const Limits limits{.max_request_bytes = 12, .max_args = 16};
  expect_incomplete("*1\r\n$1\r\n", limits);
  expect_incomplete("*1\r\n$1\r\nx\r", limits);
  expect_error("*1\r\n$10000000", "request larger than 12 bytes", limits);
}

TEST(ParseRequest, SkippedRequestsObeyTheLimitToo) {
  expect_error("*0\r\n", "request larger than 3 bytes", {3, 16});
  expect_error("   \r\n", "request larger than 4 bytes", {4, 16});
}

TEST(ParseRequest, LargeLimitsDoNotOverflow) {
  const Limits huge{.max_request_bytes = std::numeric_limits<std::size_t>::max(),
                    .max_args = std::numeric_limits<std::size_t>::max()};
  expect_error("*9223372036854775807\r\n", "request larger than 18446744073709551615 bytes", huge);
  expect_incomplete("*1\r\n$9223372036854775807\r\n", huge);
  // A large declared count reserves nothing up front.
  expect_incomplete("*1000000000000\r\n", huge);
  EXPECT_EQ(parse_whole("*1\r\n$1\r\nx\r\n", huge), (Args{"x"}));
}

// --- Reply writers ---

TEST(ReplyWriters, Simple) {
  std::string out;
  simple(out, "OK");
  EXPECT_EQ(out, "+OK\r\n");
}

TEST(ReplyWriters, SimpleDropsCrAndLf) {
  std::string out;
  simple(out, "a\r\nb\nc\r");
  EXPECT_EQ(out, "+abc\r\n");
}

TEST(ReplyWriters, Error) {
  std::string out;
  error(out, "ERR", "unknown command 'FOO'");
  EXPECT_EQ(out, "-ERR unknown command 'FOO'\r\n");
}

TEST(ReplyWriters, ErrorDropsCrAndLfFromCodeAndMessage) {
  std::string out;
  error(out, "IN\nVALID", "bad\r\nkey\r\n");
  EXPECT_EQ(out, "-INVALID badkey\r\n");
}

TEST(ReplyWriters, ErrorWithoutMessage) {
  std::string out;
  error(out, "NOAUTH", "");
  EXPECT_EQ(out, "-NOAUTH\r\n");
}

TEST(ReplyWriters, Integer) {
  std::string out;
  integer(out, 0);
  integer(out, 42);
  integer(out, -7);
  integer(out, std::numeric_limits<std::int64_t>::max());
  integer(out, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(out, ":0\r\n:42\r\n:-7\r\n:9223372036854775807\r\n:-9223372036854775808\r\n");
}

TEST(ReplyWriters, Bulk) {
  std::string out;
  bulk(out, "hello");
  bulk(out, "");
  bulk(out, "a\r\n\0b"s);
  EXPECT_EQ(out, "$5\r\nhello\r\n$0\r\n\r\n$5\r\na\r\n\0b\r\n"s);
}

TEST(ReplyWriters, Nil) {
  std::string out;
  nil(out);
  EXPECT_EQ(out, "$-1\r\n");
}

TEST(ReplyWriters, Array) {
  std::string out;
  array(out, 2);
  integer(out, 41);
  bulk(out, "x");
  array(out, 0);
  EXPECT_EQ(out, "*2\r\n:41\r\n$1\r\nx\r\n*0\r\n");
}

TEST(ReplyWriters, NilArray) {
  std::string out;
  nil_array(out);
  EXPECT_EQ(out, "*-1\r\n");
}

TEST(ReplyWriters, AppendToWhatIsThere) {
  std::string out = "+PONG\r\n";
  simple(out, "OK");
  EXPECT_EQ(out, "+PONG\r\n+OK\r\n");
}

TEST(ReplyWriters, ArrayOfBulksIsARequestTheParserReadsBack) {
  const Args args{"ACQUIRE", "billing/invoice-7", "exclusive", "30000", "WAIT", "FOREVER"};
  EXPECT_EQ(parse_whole(encode(args)), args);
}

}  // namespace
}  // namespace warden::server::resp
