// server/durable_state.h — wardend's data dir as the dispatcher sees it: the token
// source and the grant guard (restart embargo, durable longest hold).
#pragma once

#include <string>

#include "server/dispatcher.h"
#include "server/durable_tokens.h"

namespace warden::server {

class DurableState final : public GrantGuard {
 public:
  // Opens (or creates) the data dir. Throws warden::Error for a damaged state.
  DurableState(const std::string& data_dir, bool reset_state);

  DurableTokens& tokens() { return tokens_; }

  std::uint64_t embargo_ms(Time now) const override;
  void note_hold(std::chrono::milliseconds ttl_plus_delay) override;

 private:
  DurableTokens tokens_;
};

}  // namespace warden::server
