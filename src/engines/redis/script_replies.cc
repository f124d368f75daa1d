#include "engines/redis/script_replies.h"

#include "engines/resp_client/errors.h"

namespace warden::engines::redis {

std::int64_t integer_of(const resp_client::Reply& reply, std::string_view context) {
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (!reply.is_integer()) throw resp_client::unexpected_reply(reply, context);
  return reply.integer;
}

Attempt attempt_of(const resp_client::Reply& reply, std::string_view context) {
  if (reply.is_error()) throw resp_client::reply_error(reply, context);
  if (!reply.is_array() || reply.elements.size() != 2 || !reply.elements[0].is_integer() ||
      !reply.elements[1].is_integer() ||
      (reply.elements[0].integer != 0 && reply.elements[0].integer != 1)) {
    throw resp_client::unexpected_reply(reply, context);
  }
  Attempt attempt;
  const std::int64_t value = reply.elements[1].integer;
  if (reply.elements[0].integer == 1) {
    if (value <= 0) throw resp_client::unexpected_reply(reply, context);
    attempt.granted = true;
    attempt.token = static_cast<std::uint64_t>(value);
  } else {
    // The caller adds retry_ms + 1 to the clock: a value out of range would overflow it.
    if (value != -1 && (value < 1 || value > kMaxRetry.count())) {
      throw resp_client::unexpected_reply(reply, context);
    }
    attempt.retry_ms = value;
  }
  return attempt;
}

}  // namespace warden::engines::redis
