// fuzz/resp_fuzz.cc — fuzz target for the RESP2 codec (server/resp.h).
//
// The input is a connection's byte stream. It is parsed the way wardend does (request
// after request until incomplete or error) under two sets of limits, and every answer is
// checked against the contract in resp.h:
//   - complete: 0 < consumed <= min(buffer, max_request_bytes), at most max_args args,
//     every arg inside the consumed bytes; the request's bytes alone parse the same, and
//     every proper prefix of them is incomplete; the args written back as an array of
//     bulk strings parse to the same args, at exactly their size and count limits, and
//     fail one byte or one argument below them;
//   - incomplete: nothing consumed, buffer shorter than max_request_bytes, every prefix
//     incomplete too;
//   - error: nothing consumed, a one-line message, every prefix incomplete or an error.
// The reply writers get slices of the input and must keep CR and LF out of lines.
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "server/resp.h"

namespace warden::server::resp {
namespace {

bool is_one_line(std::string_view text) {
  return text.find_first_of("\r\n") == std::string_view::npos;
}

bool same_args(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// Prefix lengths worth checking for `n` bytes: the first and last eight and sixteen
// spread between. (Checking all of them makes each run quadratic and the fuzzer slow;
// the unit tests cut a pipeline at every point.)
std::vector<std::size_t> prefix_lengths(std::size_t n) {
  std::vector<std::size_t> lengths;
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 8); ++i) {
    lengths.push_back(i);
    lengths.push_back(n - 1 - i);
  }
  if (n > 16) {
    for (std::size_t i = 0; i < 16; ++i) lengths.push_back(8 + (n - 16) * i / 16);
  }
  return lengths;
}

void check_round_trip(const std::vector<std::string_view>& args) {
  std::string wire;
  array(wire, args.size());
  for (const auto arg : args) bulk(wire, arg);

  const Limits exact{.max_request_bytes = wire.size(), .max_args = args.size()};
  const Parsed p = parse_request(wire, exact);
  WARDEN_FUZZ_CHECK(p.status == Status::complete);
  WARDEN_FUZZ_CHECK(p.consumed == wire.size());
  WARDEN_FUZZ_CHECK(same_args(p.args, args));

  const Limits short_by_a_byte{.max_request_bytes = wire.size() - 1, .max_args = args.size()};
  WARDEN_FUZZ_CHECK(parse_request(wire, short_by_a_byte).status == Status::error);
  if (!args.empty()) {
    const Limits short_by_an_arg{.max_request_bytes = wire.size(), .max_args = args.size() - 1};
    WARDEN_FUZZ_CHECK(parse_request(wire, short_by_an_arg).status == Status::error);
  }
}

void check_complete(std::string_view buffer, const Parsed& p, const Limits& limits) {
  WARDEN_FUZZ_CHECK(p.consumed > 0);
  WARDEN_FUZZ_CHECK(p.consumed <= buffer.size());
  WARDEN_FUZZ_CHECK(p.consumed <= limits.max_request_bytes);
  WARDEN_FUZZ_CHECK(p.args.size() <= limits.max_args);
  WARDEN_FUZZ_CHECK(p.error.empty());
  for (const auto arg : p.args) {
    WARDEN_FUZZ_CHECK(arg.data() >= buffer.data());
    WARDEN_FUZZ_CHECK(arg.data() + arg.size() <= buffer.data() + p.consumed);
  }

  const std::string_view request = buffer.substr(0, p.consumed);
  const Parsed alone = parse_request(request, limits);
  WARDEN_FUZZ_CHECK(alone.status == Status::complete);
  WARDEN_FUZZ_CHECK(alone.consumed == p.consumed);
  WARDEN_FUZZ_CHECK(same_args(alone.args, p.args));
  for (const std::size_t n : prefix_lengths(request.size())) {
    WARDEN_FUZZ_CHECK(parse_request(request.substr(0, n), limits).status == Status::incomplete);
  }
  check_round_trip(p.args);
}

void check_not_complete(std::string_view buffer, const Parsed& p, const Limits& limits) {
  WARDEN_FUZZ_CHECK(p.consumed == 0);
  WARDEN_FUZZ_CHECK(p.args.empty());
  if (p.status == Status::incomplete) {
    WARDEN_FUZZ_CHECK(p.error.empty());
    WARDEN_FUZZ_CHECK(buffer.empty() || buffer.size() < limits.max_request_bytes);
  } else {
    WARDEN_FUZZ_CHECK(!p.error.empty());
    WARDEN_FUZZ_CHECK(is_one_line(p.error));
  }
  for (const std::size_t n : prefix_lengths(buffer.size())) {
    const Status s = parse_request(buffer.substr(0, n), limits).status;
    WARDEN_FUZZ_CHECK(s == Status::incomplete || (p.status == Status::error && s == Status::error));
  }
}

// Parses `input` as a connection would: request after request.
void check_stream(std::string_view input, const Limits& limits) {
  while (true) {
    const Parsed p = parse_request(input, limits);
    if (p.status != Status::complete) {
      check_not_complete(input, p, limits);
      return;
    }
    check_complete(input, p, limits);
    input.remove_prefix(p.consumed);
  }
}

void check_writers(std::string_view input) {
  const std::string_view half = input.substr(0, input.size() / 2);
  std::string out;
  simple(out, input);
  WARDEN_FUZZ_CHECK(out.size() >= 3 && out.front() == '+' && out.ends_with("\r\n"));
  WARDEN_FUZZ_CHECK(is_one_line(std::string_view(out).substr(0, out.size() - 2)));

  out.clear();
  error(out, half, input.substr(half.size()));
  WARDEN_FUZZ_CHECK(out.size() >= 3 && out.front() == '-' && out.ends_with("\r\n"));
  WARDEN_FUZZ_CHECK(is_one_line(std::string_view(out).substr(0, out.size() - 2)));

  std::int64_t value = 0;
  std::memcpy(&value, input.data(), std::min(input.size(), sizeof value));
  out.clear();
  integer(out, value);
  WARDEN_FUZZ_CHECK(out == ":" + std::to_string(value) + "\r\n");
}

}  // namespace
}  // namespace warden::server::resp

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warden::server::resp;
  // An empty input is a valid call; keep data() non-null for the views.
  static const char kEmpty[1] = {};
  const std::string_view input = size == 0
                                     ? std::string_view(kEmpty, 0)
                                     : std::string_view(reinterpret_cast<const char*>(data), size);
  check_stream(input, Limits{});
  check_stream(input, Limits{.max_request_bytes = 64, .max_args = 4});
  check_writers(input);
  return 0;
}
