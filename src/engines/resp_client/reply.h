// engines/resp_client/reply.h — one RESP2 reply as a plain value.
//
// Connections convert hiredis' reply objects into this type, so engine code never
// touches hiredis and never frees anything by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace warden::engines::resp_client {

struct Reply {
  enum class Type : std::uint8_t { status, error, integer, bulk, nil, array };

  Type type = Type::nil;
  std::int64_t integer = 0;     // Type::integer
  std::string text;             // Type::status, Type::error (the whole line), Type::bulk
  std::vector<Reply> elements;  // Type::array

  bool is_nil() const { return type == Type::nil; }
  bool is_error() const { return type == Type::error; }
  bool is_integer() const { return type == Type::integer; }
  bool is_array() const { return type == Type::array; }

  // The code word of an error reply ("ERR", "NOAUTH", "STARTING", ...): its text up to
  // the first space. Empty for replies that are not errors.
  std::string_view error_code() const;

  // A short rendering for error messages, in the style of redis-cli, cut after about
  // `max_bytes` bytes.
  std::string describe(std::size_t max_bytes = 200) const;
};

// Convenience constructors (mostly for tests).
Reply status_reply(std::string text);
Reply error_reply(std::string text);
Reply integer_reply(std::int64_t value);
Reply bulk_reply(std::string text);
Reply nil_reply();
Reply array_reply(std::vector<Reply> elements);

}  // namespace warden::engines::resp_client
