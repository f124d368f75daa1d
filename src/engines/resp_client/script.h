// engines/resp_client/script.h — Lua scripts run on a RESP server: each is sent by its
// SHA-1 (EVALSHA), and again in full (EVAL, which also caches it there) when the server
// answers NOSCRIPT because it does not know it yet (after a restart or SCRIPT FLUSH).
//
// Engines embed their scripts at build time with embed_scripts.cmake, which defines
// one Script per lua/NAME.lua.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engines/resp_client/connection.h"

namespace warden::engines::resp_client {

struct Script {
  std::string_view name;    // "acquire", ... for messages
  std::string_view sha1;    // of `source`, lower-case hex, for EVALSHA
  std::string_view source;  // for EVAL when the server does not know the script yet
};

struct ScriptCall {
  const Script* script = nullptr;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

// EVALSHA sha1 numkeys keys... args... (by_sha), or EVAL source numkeys ...
Command script_command(const ScriptCall& call, bool by_sha);

}  // namespace warden::engines::resp_client
