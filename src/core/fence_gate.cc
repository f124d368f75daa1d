#include "warden/fence_gate.h"

namespace warden {

bool FenceGate::admit(std::string_view lock, std::uint64_t token) {
  std::lock_guard guard(mu_);
  auto [it, inserted] = highest_.try_emplace(std::string(lock), token);
  if (inserted) return true;
  if (token < it->second) return false;
  it->second = token;
  return true;
}

bool FenceGate::admit(const Sequencer& sequencer) {
  return admit(sequencer.group + '/' + sequencer.name, sequencer.token);
}

std::uint64_t FenceGate::highest(std::string_view lock) const {
  std::lock_guard guard(mu_);
  auto it = highest_.find(std::string(lock));
  return it == highest_.end() ? 0 : it->second;
}

}  // namespace warden
