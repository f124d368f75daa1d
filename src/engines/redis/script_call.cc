#include "engines/redis/script_call.h"

#include <cstddef>
#include <utility>

namespace warden::engines::redis {

resp_client::RoundResult run_scripts(resp_client::Runner& runner,
                                     const std::vector<ScriptCall>& calls,
                                     const resp_client::Command* then) {
  std::vector<resp_client::Command> commands;
  commands.reserve(calls.size() + 1);
  for (const ScriptCall& call : calls) commands.push_back(resp_client::script_command(call, true));
  if (then != nullptr) commands.push_back(*then);
  auto result = runner.run(std::move(commands));

  std::vector<std::size_t> unknown;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (result.replies[i].error_code() == "NOSCRIPT") unknown.push_back(i);
  }
  if (unknown.empty()) return result;
  std::vector<resp_client::Command> retry;
  retry.reserve(unknown.size());
  for (std::size_t i : unknown) retry.push_back(resp_client::script_command(calls[i], false));
  if (then != nullptr) retry.push_back(*then);
  auto second = runner.run(std::move(retry));
  for (std::size_t n = 0; n < unknown.size(); ++n) {
    result.replies[unknown[n]] = std::move(second.replies[n]);
  }
  // The second round's `then` acknowledges the scripts it ran, and the first round's ones.
  if (then != nullptr) result.replies.back() = std::move(second.replies.back());
  return result;
}

}  // namespace warden::engines::redis
