#include "engines/resp_client/script.h"

namespace warden::engines::resp_client {

Command script_command(const ScriptCall& call, bool by_sha) {
  Command cmd;
  cmd.reserve(3 + call.keys.size() + call.args.size());
  cmd.emplace_back(by_sha ? "EVALSHA" : "EVAL");
  cmd.emplace_back(by_sha ? call.script->sha1 : call.script->source);
  cmd.push_back(std::to_string(call.keys.size()));
  cmd.insert(cmd.end(), call.keys.begin(), call.keys.end());
  cmd.insert(cmd.end(), call.args.begin(), call.args.end());
  return cmd;
}

}  // namespace warden::engines::resp_client
