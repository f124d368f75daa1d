// engines/redis/script_replies.h — the Lua scripts' replies (lua/) as results. No I/O,
// so a server answering anything at all can be tried without one
// (fuzz/resp_reply_fuzz.cc). Every function throws the mapped Error for an error reply
// and Error(internal) (resp_client::unexpected_reply) for any other shape; `context`
// names the call and endpoint for messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "engines/resp_client/reply.h"
#include "warden/error.h"

namespace warden::engines::redis {

// The longest acquire.lua may ask a waiter to wait before something runs out by itself:
// no lease outlives the longest ttl (7 days) and lock delay (1 hour), with room to spare.
inline constexpr std::chrono::milliseconds kMaxRetry = std::chrono::hours(24 * 8);

// An integer reply (release.lua, check.lua, each of renew.lua's answers).
std::int64_t integer_of(const resp_client::Reply& reply, std::string_view context);

// acquire.lua's answer: {1, token} or {0, retry_ms}.
struct Attempt {
  bool granted = false;
  std::uint64_t token = 0;  // when granted: positive
  // When not: until something runs out by itself, 1..kMaxRetry ms; -1 none.
  std::int64_t retry_ms = -1;
};
Attempt attempt_of(const resp_client::Reply& reply, std::string_view context);

// The error of a grant that `acknowledged` of the `wanted` replicas (min_replicas) had
// within `timeout`, and was released again: the blocking and asynchronous acquires'.
Error too_few_replicas(std::string_view context, std::int64_t acknowledged, std::int64_t wanted,
                       std::chrono::milliseconds timeout);

}  // namespace warden::engines::redis
