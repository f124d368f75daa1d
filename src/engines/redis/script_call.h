// engines/redis/script_call.h — running the embedded Lua scripts: EVALSHA, and EVAL
// for those the server does not know (after a restart or SCRIPT FLUSH), which also
// caches them there for the next EVALSHA.
#pragma once

#include <string>
#include <vector>

#include "engines/redis/scripts.h"
#include "engines/resp_client/pipeline.h"

namespace warden::engines::redis {

struct ScriptCall {
  const Script* script = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

// Runs `calls` in one pipelined round (two if some met NOSCRIPT: those are sent again
// with EVAL). Result::sent is when the first round started, so it is no later than
// any script ran. Error replies (other than NOSCRIPT) come back as replies; transport
// failures throw as Pipeline::run does.
resp_client::Pipeline::Result run_scripts(resp_client::Pipeline& pipeline,
                                          const std::vector<ScriptCall>& calls);

}  // namespace warden::engines::redis
