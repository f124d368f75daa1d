// engines/redis/scripts.h — the Lua scripts of redis://, embedded at build time from
// lua/*.lua (with the shared parts lua/lock_base.lua and lua/lock.lua spliced in where
// each script includes them).
#pragma once

#include <string_view>

namespace warden::engines::redis {

struct Script {
  std::string_view name;    // "acquire", ... for messages
  std::string_view sha1;    // of `source`, lower-case hex, for EVALSHA
  std::string_view source;  // for EVAL when the server does not know the script yet
};

extern const Script k_acquire_script;
extern const Script k_release_script;
extern const Script k_withdraw_script;
extern const Script k_renew_script;
extern const Script k_check_script;

}  // namespace warden::engines::redis
