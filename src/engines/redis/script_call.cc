#include "engines/redis/script_call.h"

#include <cstddef>
#include <utility>

namespace warden::engines::redis {
namespace {

resp_client::Command command(const ScriptCall& call, bool by_sha) {
  resp_client::Command cmd;
  cmd.reserve(3 + call.keys.size() + call.args.size());
  cmd.emplace_back(by_sha ? "EVALSHA" : "EVAL");
  cmd.emplace_back(by_sha ? call.script->sha1 : call.script->source);
  cmd.push_back(std::to_string(call.keys.size()));
  cmd.insert(cmd.end(), call.keys.begin(), call.keys.end());
  cmd.insert(cmd.end(), call.args.begin(), call.args.end());
  return cmd;
}

}  // namespace

resp_client::Pipeline::Result run_scripts(resp_client::Pipeline& pipeline,
                                          const std::vector<ScriptCall>& calls) {
  std::vector<resp_client::Command> commands;
  commands.reserve(calls.size());
  for (const ScriptCall& call : calls) commands.push_back(command(call, true));
  auto result = pipeline.run(std::move(commands));

  std::vector<std::size_t> unknown;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (result.replies[i].error_code() == "NOSCRIPT") unknown.push_back(i);
  }
  if (unknown.empty()) return result;
  std::vector<resp_client::Command> retry;
  retry.reserve(unknown.size());
  for (std::size_t i : unknown) retry.push_back(command(calls[i], false));
  auto second = pipeline.run(std::move(retry));
  for (std::size_t n = 0; n < unknown.size(); ++n) {
    result.replies[unknown[n]] = std::move(second.replies[n]);
  }
  return result;
}

}  // namespace warden::engines::redis
