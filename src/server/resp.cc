// server/resp.cc — RESP2 request parsing and reply writing.
//
// parse_request() walks one request from the front of the buffer and checks, before it
// waits for any byte, that the request can still fit in Limits::max_request_bytes: a
// count of n elements needs at least n * kMinElementBytes more bytes, and a bulk length
// needs its data and CRLF plus the smallest possible remaining elements. Anything that
// ends up incomplete with a full-sized buffer is too large as well, which bounds the
// unterminated cases (an inline line without LF, a header line still being typed).
#include "server/resp.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

namespace warden::server::resp {
namespace {

constexpr std::string_view kCrlf = "\r\n";

// The smallest array element: "$0\r\n\r\n".
constexpr std::size_t kMinElementBytes = 6;

Parsed incomplete() { return {}; }

Parsed fail(std::string why) {
  Parsed p;
  p.status = Status::error;
  p.error = "Protocol error: " + std::move(why);
  return p;
}

Parsed too_large(const Limits& limits) {
  return fail("request larger than " + std::to_string(limits.max_request_bytes) + " bytes");
}

Parsed too_many_args(const Limits& limits) {
  return fail("more than " + std::to_string(limits.max_args) + " arguments");
}

// A request of `consumed` bytes with no arguments, which the caller skips.
Parsed skip(std::size_t consumed, const Limits& limits) {
  if (consumed > limits.max_request_bytes) return too_large(limits);
  Parsed p;
  p.status = Status::complete;
  p.consumed = consumed;
  return p;
}

// `c` as it can be quoted in an error line.
std::string printable(char c) {
  if (c > ' ' && c < '\x7f') return std::string(1, c);
  constexpr std::string_view kHex = "0123456789abcdef";
  const auto byte = static_cast<unsigned char>(c);
  return std::string("\\x") + kHex[byte >> 4] + kHex[byte & 0xf];
}

// A count or length line: digits, then CRLF.
struct Number {
  enum class Kind { ok, incomplete, bad };
  Kind kind = Kind::bad;
  std::int64_t value = 0;
  std::size_t next = 0;  // index just past the CRLF
};

// Reads a Number at buffer[pos..]. Decimal digits without sign or leading zero; with
// `allow_nil`, also exactly "-1". Bad as soon as the bytes present show it: a character
// that is not a digit, a leading zero followed by a digit, a value beyond int64, CR
// without LF. A well-formed line is at most 21 bytes, so an unterminated one stays short.
Number read_number(std::string_view buffer, std::size_t pos, bool allow_nil) {
  using Kind = Number::Kind;
  std::size_t i = pos;
  bool negative = false;
  if (allow_nil && i < buffer.size() && buffer[i] == '-') {
    negative = true;
    ++i;
  }
  const std::size_t digits = i;
  std::int64_t value = 0;
  for (; i < buffer.size() && buffer[i] >= '0' && buffer[i] <= '9'; ++i) {
    if (i > digits && buffer[digits] == '0') return {};
    const int d = buffer[i] - '0';
    if (value > (std::numeric_limits<std::int64_t>::max() - d) / 10) return {};
    value = value * 10 + d;
    if (negative && value != 1) return {};
  }
  if (i == buffer.size()) return {Kind::incomplete};
  if (i == digits || buffer[i] != '\r') return {};
  if (i + 1 == buffer.size()) return {Kind::incomplete};
  if (buffer[i + 1] != '\n') return {};
  return {Kind::ok, negative ? -value : value, i + 2};
}

Parsed parse_array(std::string_view buffer, const Limits& limits) {
  using Kind = Number::Kind;
  const std::size_t max = limits.max_request_bytes;
  const Number count = read_number(buffer, 1, /*allow_nil=*/true);
  if (count.kind == Kind::incomplete) return incomplete();
  if (count.kind == Kind::bad) return fail("invalid multibulk length");
  if (count.value <= 0) return skip(count.next, limits);  // "*0" or "*-1"

  const auto n = static_cast<std::uint64_t>(count.value);
  if (n > limits.max_args) return too_many_args(limits);
  std::size_t pos = count.next;
  if (pos > max || n > (max - pos) / kMinElementBytes) return too_large(limits);

  Parsed p;
  // Room for the elements the buffer can hold, not for what the count claims.
  p.args.reserve(std::min<std::size_t>(n, (buffer.size() - pos) / kMinElementBytes));
  for (std::size_t i = 0; i < n; ++i) {
    if (pos == buffer.size()) return incomplete();
    if (buffer[pos] != '$') return fail("expected '$', got '" + printable(buffer[pos]) + "'");
    const Number length = read_number(buffer, pos + 1, /*allow_nil=*/false);
    if (length.kind == Kind::incomplete) return incomplete();
    if (length.kind == Kind::bad) return fail("invalid bulk length");

    // This element's data and CRLF, then the smallest elements still to come, must fit.
    // (rest cannot overflow: the count check above bounds n * kMinElementBytes by max.)
    const std::size_t start = length.next;
    const std::size_t rest = (n - i - 1) * kMinElementBytes + kCrlf.size();
    if (start > max || rest > max - start ||
        static_cast<std::uint64_t>(length.value) > max - start - rest) {
      return too_large(limits);
    }
    const std::size_t end = start + static_cast<std::size_t>(length.value);
    if (buffer.size() > end && buffer[end] != '\r') return fail("bulk data not ended by CRLF");
    if (buffer.size() > end + 1 && buffer[end + 1] != '\n') {
      return fail("bulk data not ended by CRLF");
    }
    if (buffer.size() < end + kCrlf.size()) return incomplete();
    p.args.push_back(buffer.substr(start, end - start));
    pos = end + kCrlf.size();
  }
  p.status = Status::complete;
  p.consumed = pos;
  return p;
}

bool is_separator(char c) { return c == ' ' || c == '\t' || c == '\r'; }

Parsed parse_inline(std::string_view buffer, const Limits& limits) {
  // Only the first max_request_bytes can hold the LF of a request within the limit.
  const std::size_t lf = buffer.substr(0, limits.max_request_bytes).find('\n');
  if (lf == std::string_view::npos) return incomplete();

  const std::string_view line = buffer.substr(0, lf);
  Parsed p;
  std::size_t i = 0;
  while (true) {
    while (i < line.size() && is_separator(line[i])) ++i;
    if (i == line.size()) break;
    const std::size_t start = i;
    while (i < line.size() && !is_separator(line[i])) ++i;
    if (p.args.size() == limits.max_args) return too_many_args(limits);
    p.args.push_back(line.substr(start, i - start));
  }
  p.status = Status::complete;
  p.consumed = lf + 1;
  return p;
}

// Appends `text` without its CR and LF bytes.
void append_line(std::string& out, std::string_view text) {
  for (const char c : text) {
    if (c != '\r' && c != '\n') out += c;
  }
}

template <typename Int>
void append_decimal(std::string& out, Int value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, result.ptr);
}

}  // namespace

Parsed parse_request(std::string_view buffer, const Limits& limits) {
  if (buffer.empty()) return incomplete();
  Parsed p = buffer.front() == '*' ? parse_array(buffer, limits) : parse_inline(buffer, limits);
  // Incomplete means every byte of the buffer belongs to this request, and more follow.
  if (p.status == Status::incomplete && buffer.size() >= limits.max_request_bytes) {
    return too_large(limits);
  }
  return p;
}

void simple(std::string& out, std::string_view text) {
  out += '+';
  append_line(out, text);
  out += kCrlf;
}

void error(std::string& out, std::string_view code, std::string_view message) {
  out += '-';
  append_line(out, code);
  if (!message.empty()) {
    out += ' ';
    append_line(out, message);
  }
  out += kCrlf;
}

void integer(std::string& out, std::int64_t value) {
  out += ':';
  append_decimal(out, value);
  out += kCrlf;
}

void bulk(std::string& out, std::string_view bytes) {
  out += '$';
  append_decimal(out, bytes.size());
  out += kCrlf;
  out += bytes;
  out += kCrlf;
}

void nil(std::string& out) { out += "$-1\r\n"; }

void array(std::string& out, std::size_t n) {
  out += '*';
  append_decimal(out, n);
  out += kCrlf;
}

void nil_array(std::string& out) { out += "*-1\r\n"; }

}  // namespace warden::server::resp
