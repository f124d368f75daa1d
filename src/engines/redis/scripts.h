// engines/redis/scripts.h — the Lua scripts of redis://, embedded at build time from
// lua/*.lua (with the shared parts lua/lock_base.lua and lua/lock.lua spliced in where
// each script includes them).
#pragma once

#include "engines/resp_client/script.h"

namespace warden::engines::redis {

using resp_client::Script;

extern const Script k_acquire_script;
extern const Script k_release_script;
extern const Script k_withdraw_script;
extern const Script k_renew_script;
extern const Script k_check_script;
extern const Script k_proclaim_script;

}  // namespace warden::engines::redis
