#include "engines/redlock/script_replies.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

namespace warden::engines::redlock {
namespace {

using resp_client::Reply;

std::optional<std::uint64_t> parse_u64(const Reply& reply) {
  if (reply.type != Reply::Type::bulk) return std::nullopt;
  std::uint64_t value = 0;
  const std::string& text = reply.text;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<bool> yes_or_no(const Reply& reply) {
  if (!reply.is_integer() || (reply.integer != 0 && reply.integer != 1)) return std::nullopt;
  return reply.integer == 1;
}

std::optional<std::optional<TokenRead>> token_read_of(const Reply& reply) {
  if (!reply.is_array() || reply.elements.empty() || !reply.elements[0].is_integer()) {
    return std::nullopt;
  }
  if (reply.elements[0].integer == 0) return std::optional<TokenRead>();
  if (reply.elements[0].integer != 1 || reply.elements.size() != 4) return std::nullopt;
  const auto last = parse_u64(reply.elements[1]);
  const auto seconds = parse_u64(reply.elements[2]);
  const auto micros = parse_u64(reply.elements[3]);
  if (!last || !seconds || !micros) return std::nullopt;
  // TIME's microseconds are below a second, and the token is one more than the largest
  // read: values that would wrap the clock or the token are not a master's answer.
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  if (*micros >= 1'000'000 || *seconds >= (kMax - 1'000'000) / 1'000'000 || *last == kMax) {
    return std::nullopt;
  }
  return std::optional<TokenRead>(TokenRead{*last, *seconds * 1'000'000 + *micros});
}

std::optional<std::optional<std::uint64_t>> granted_token_of(const Reply& reply) {
  if (!reply.is_array() || reply.elements.empty() || !reply.elements[0].is_integer()) {
    return std::nullopt;
  }
  if (reply.elements[0].integer == 0 && reply.elements.size() == 1) {
    return std::optional<std::uint64_t>();
  }
  if (reply.elements[0].integer != 1 || reply.elements.size() != 2) return std::nullopt;
  const auto token = parse_u64(reply.elements[1]);
  if (!token || *token == 0) return std::nullopt;
  return std::optional<std::uint64_t>(*token);
}

}  // namespace warden::engines::redlock
