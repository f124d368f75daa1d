// engines/redis/script_call.h — running the embedded Lua scripts through a pipeline:
// EVALSHA, and EVAL for those the server does not know (after a restart or SCRIPT
// FLUSH), which also caches them there for the next EVALSHA.
#pragma once

#include <vector>

#include "engines/resp_client/pipeline.h"
#include "engines/resp_client/script.h"

namespace warden::engines::redis {

using resp_client::ScriptCall;

// Runs `calls` in one pipelined round (per node, through a cluster) (two if some met NOSCRIPT:
// those are sent again with EVAL). Result::sent is when the first round started, so it is no later
// than any script ran. Error replies (other than NOSCRIPT) come back as replies; transport failures
// throw as Pipeline::run does. `then`, when given, follows the scripts in every round sent (WAIT,
// which then acknowledges them), and its reply from the last round comes after the calls' replies.
resp_client::RoundResult run_scripts(resp_client::Runner& runner,
                                     const std::vector<ScriptCall>& calls,
                                     const resp_client::Command* then = nullptr);

}  // namespace warden::engines::redis
