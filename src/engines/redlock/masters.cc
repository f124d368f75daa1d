#include "engines/redlock/masters.h"

#include <utility>

namespace warden::engines::redlock {

using resp_client::Command;
using resp_client::Leg;
using resp_client::ScriptCall;

Masters::Masters(const RedlockConfig& config) {
  for (const auto& options : config.masters) {
    auto connector = std::make_shared<resp_client::Connector>(options, config.reconnect);
    auto pool = std::make_unique<resp_client::Pool>(connector, config.pool_size);
    masters_.push_back(Master{std::move(connector), std::move(pool)});
  }
}

std::vector<Leg> Masters::run(const std::vector<std::vector<ScriptCall>>& calls,
                              std::chrono::milliseconds timeout,
                              const resp_client::Enough& enough) {
  std::vector<Leg> legs(masters_.size());
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    legs[i].pool = masters_[i].pool.get();
    for (const ScriptCall& call : calls[i]) {
      legs[i].commands.push_back(resp_client::script_command(call, true));
    }
  }
  resp_client::fan_out(legs, Clock::now() + timeout, enough);

  // Masters that did not know a script: those calls again, in full.
  std::vector<Leg> again(masters_.size());
  std::vector<std::vector<std::size_t>> unknown(masters_.size());
  bool any = false;
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    again[i].pool = masters_[i].pool.get();
    if (!legs[i].ok()) continue;
    for (std::size_t n = 0; n < legs[i].replies.size(); ++n) {
      if (legs[i].replies[n].error_code() != "NOSCRIPT") continue;
      unknown[i].push_back(n);
      again[i].commands.push_back(resp_client::script_command(calls[i][n], false));
      any = true;
    }
  }
  if (!any) return legs;
  resp_client::fan_out(again, Clock::now() + timeout);
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    if (unknown[i].empty()) continue;
    if (!again[i].ok()) {
      legs[i].error = again[i].error;
      continue;
    }
    for (std::size_t n = 0; n < unknown[i].size(); ++n) {
      legs[i].replies[unknown[i][n]] = std::move(again[i].replies[n]);
    }
  }
  return legs;
}

std::vector<Leg> Masters::run_everywhere(const ScriptCall& call, std::chrono::milliseconds timeout,
                                         const resp_client::Enough& enough) {
  return run(std::vector<std::vector<ScriptCall>>(masters_.size(), {call}), timeout, enough);
}

std::vector<Leg> Masters::ping(std::chrono::milliseconds timeout) {
  std::vector<Leg> legs(masters_.size());
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    legs[i].pool = masters_[i].pool.get();
    legs[i].commands.push_back(Command{"PING"});
  }
  resp_client::fan_out(legs, Clock::now() + timeout);
  return legs;
}

}  // namespace warden::engines::redlock
