// Client::inspect and Client::list: validated here, answered by the engine.
#include <algorithm>
#include <string>
#include <vector>

#include "core/client_state.h"
#include "core/names.h"
#include "warden/client.h"

namespace warden {

LockStatus Client::inspect(std::string_view group, std::string_view name) const {
  core::validate_group(group);
  core::validate_name(name);
  const core::LockKey key{std::string(group), std::string(name)};
  state_->settle_release_of(key);
  LockStatus status = state_->engine().inspect(key);
  status.group = std::string(group);
  status.name = std::string(name);
  return status;
}

std::vector<LockSummary> Client::list(std::string_view group) const {
  core::validate_group(group);
  state_->settle_releases();
  std::vector<LockSummary> locks = state_->engine().list(group);
  // Engines page in their own order; the promise is sorted by name, once each.
  std::sort(locks.begin(), locks.end(),
            [](const LockSummary& a, const LockSummary& b) { return a.name < b.name; });
  locks.erase(
      std::unique(locks.begin(), locks.end(),
                  [](const LockSummary& a, const LockSummary& b) { return a.name == b.name; }),
      locks.end());
  return locks;
}

}  // namespace warden
