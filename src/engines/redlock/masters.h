// engines/redlock/masters.h — the N independent masters of a Redlock and script rounds
// on them: one script call list per master, sent to every master at once
// (resp_client::fan_out), each master's part bounded by the round's timeout.
//
// Each master has its own Connector (a master that refused a connection is not tried
// again within its back-off, so a dead master costs nothing per round) and its own
// Pool (each concurrent round takes a connection per master).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engines/redlock/redlock_config.h"
#include "engines/resp_client/connector.h"
#include "engines/resp_client/fan_out.h"
#include "engines/resp_client/pool.h"
#include "engines/resp_client/script.h"

namespace warden::engines::redlock {

class Masters {
 public:
  explicit Masters(const RedlockConfig& config);
  Masters(const Masters&) = delete;
  Masters& operator=(const Masters&) = delete;

  std::size_t size() const { return masters_.size(); }
  const std::string& endpoint(std::size_t i) const { return masters_[i].connector->endpoint(); }

  // Runs calls[i] on master i (an empty list skips it) in one round bounded by
  // `timeout`; a master that answers NOSCRIPT (it restarted, or was flushed) gets those
  // calls again as EVAL in a second round with the same bound. One Leg per master, in
  // order: its replies (error replies included), or why it failed.
  // With `enough`, the round ends as soon as the answers so far decide it
  // (resp_client::fan_out); masters not waited for are failed legs.
  std::vector<resp_client::Leg> run(const std::vector<std::vector<resp_client::ScriptCall>>& calls,
                                    std::chrono::milliseconds timeout,
                                    const resp_client::Enough& enough = {});

  // The same call on every master.
  std::vector<resp_client::Leg> run_everywhere(const resp_client::ScriptCall& call,
                                               std::chrono::milliseconds timeout,
                                               const resp_client::Enough& enough = {});

  // PING on every master, bounded by `timeout`.
  std::vector<resp_client::Leg> ping(std::chrono::milliseconds timeout);

 private:
  struct Master {
    std::shared_ptr<resp_client::Connector> connector;
    std::unique_ptr<resp_client::Pool> pool;
  };
  std::vector<Master> masters_;
};

}  // namespace warden::engines::redlock
