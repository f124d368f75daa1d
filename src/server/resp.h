// server/resp.h — RESP2 framing for wardend: a request parser and reply writers.
//
// Map of the file
//   Limits, Status, Parsed   what parse_request() is allowed, and what it answers
//   parse_request()          one request from the front of a connection's input buffer
//   simple() .. nil_array()  append one reply (or an array header) to an output string
//
// Requests are what redis-cli, redis-benchmark and hiredis send:
//
//   array   "*" count CRLF, then count times: "$" length CRLF <length bytes> CRLF
//   inline  a line of words separated by runs of spaces, tabs or CRs, ending in LF
//           (so CRLF works too); for telnet users, so quotes are not interpreted
//
// A buffer that starts with '*' is an array; anything else is an inline line. Counts and
// lengths are plain decimals: no sign, no leading zero, no spaces. The one exception is
// the nil array "*-1", which (like "*0" and an empty inline line) is a request with no
// arguments: parse_request() reports it complete with no args so the caller skips it.
//
// The parser keeps no state between calls: the caller appends what it reads to its
// buffer, calls parse_request() and drops the consumed bytes until the answer is
// incomplete (wait for more) or error (reply and close). Its cost per call is bounded by the
// headers of one request (at most Limits::max_args of them), plus one memchr over an inline line.
// It never reads past the buffer, never recurses and never allocates more than Limits::max_args
// views, so a peer's declared lengths cost nothing until the bytes have arrived.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace warden::server::resp {

struct Limits {
  // Largest request accepted, in bytes on the wire: headers, data and every CRLF.
  // A request that is declared or shown to be larger is an error at once.
  std::size_t max_request_bytes = 64 * 1024;
  // Most arguments (command name included) in one request: an ACQUIRESET of 1024
  // members is 3 + 2 × 1024 + at most 5 options. The byte limit above still bounds it.
  std::size_t max_args = 2056;
};

enum class Status {
  complete,    // one request parsed; `consumed` bytes of it
  incomplete,  // the buffer holds only the start of a request; read more and retry
  error,       // unrecoverable framing; reply -ERR `error`, then close the connection
};

struct Parsed {
  Status status = Status::incomplete;
  // Bytes of the buffer this request took. > 0 when complete, 0 otherwise.
  std::size_t consumed = 0;
  // The arguments, command name first; views into the buffer given to parse_request(),
  // valid while it is. Empty for a skipped request ("*0", "*-1", a blank inline line).
  std::vector<std::string_view> args;
  // Why, when status is error: one line without CR or LF, e.g.
  // "Protocol error: invalid bulk length". Empty otherwise.
  std::string error;
};

// Parses the request at the front of `buffer`.
//
// complete:   `args` views into `buffer`; the next request starts at `consumed`.
// incomplete: nothing is consumed; call again with the same bytes and more after them.
//             Never answered when buffer.size() >= limits.max_request_bytes.
// error:      the bytes cannot be a request within `limits` (a count or length that is
//             not a decimal or overflows, a negative length, an element that is not a
//             bulk string, no CRLF after bulk data, more than max_args arguments, more
//             than max_request_bytes as soon as the declared lengths or an unterminated
//             line show it). There is no way to resynchronise: close the connection.
Parsed parse_request(std::string_view buffer, const Limits& limits = {});

// Reply writers. Each appends one complete RESP2 value to `out` (array() and
// nil_array() append a header; the caller then appends `n` values).

// "+text\r\n". CR and LF are removed from `text`.
void simple(std::string& out, std::string_view text);
// "-CODE message\r\n" ("-CODE\r\n" for an empty message). CR and LF are removed from both.
void error(std::string& out, std::string_view code, std::string_view message);
// ":value\r\n".
void integer(std::string& out, std::int64_t value);
// "$length\r\n<bytes>\r\n". Binary-safe.
void bulk(std::string& out, std::string_view bytes);
// "$-1\r\n": the nil bulk string.
void nil(std::string& out);
// "*n\r\n": an array of the `n` values appended next.
void array(std::string& out, std::size_t n);
// "*-1\r\n": the nil array.
void nil_array(std::string& out);

}  // namespace warden::server::resp
