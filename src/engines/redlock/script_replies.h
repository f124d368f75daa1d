// engines/redlock/script_replies.h — one master's answer to a Lua script (lua/) as a
// vote. No I/O, so a master answering anything at all can be tried without one
// (fuzz/resp_reply_fuzz.cc). Anything that is not the script's answer is a failed vote
// (nullopt), never an exception: one master's garbage must not fail a round the others
// can decide.
#pragma once

#include <cstdint>
#include <optional>

#include "engines/redlock/quorum.h"
#include "engines/resp_client/reply.h"

namespace warden::engines::redlock {

// An integer reply 1 or 0 (yes or no); nullopt for anything else.
std::optional<bool> yes_or_no(const resp_client::Reply& reply);

// acquire.lua's answer: {0} (held by another: an empty read), or {1, last, seconds,
// micros} (our key is set: the lock's last token there and the master's TIME). nullopt
// for anything else, including values next_token could not add one to.
std::optional<std::optional<TokenRead>> token_read_of(const resp_client::Reply& reply);

// acquire_alone.lua's answer: {0} (held by another: no token), or {1, TOKEN} (our key is
// set with this token, above 0). nullopt for anything else.
std::optional<std::optional<std::uint64_t>> granted_token_of(const resp_client::Reply& reply);

}  // namespace warden::engines::redlock
