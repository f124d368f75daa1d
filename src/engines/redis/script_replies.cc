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

Error too_few_replicas(std::string_view context, std::int64_t acknowledged, std::int64_t wanted,
                       std::chrono::milliseconds timeout) {
  return Error(Errc::unavailable,
               std::string(context) + ": the grant reached " + std::to_string(acknowledged) +
                   " of the " + std::to_string(wanted) + " replicas min_replicas asks for within " +
                   std::to_string(timeout.count()) + " ms; released");
}

}  // namespace warden::engines::redis
