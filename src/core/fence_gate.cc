#include "warden/fence_gate.h"

namespace warden {

bool FenceGate::admit(std::string_view lock, std::uint64_t token, std::uint64_t reuse) {
  const std::pair written{token, reuse};
  std::lock_guard guard(mu_);
  auto [it, inserted] = highest_.try_emplace(std::string(lock), written);
  if (inserted) return true;
  if (written < it->second) return false;
  it->second = written;
  return true;
}

bool FenceGate::admit(const Sequencer& sequencer) {
  return admit(sequencer.group + '/' + sequencer.name, sequencer.token, sequencer.reuse);
}

std::uint64_t FenceGate::highest(std::string_view lock) const {
  std::lock_guard guard(mu_);
  auto it = highest_.find(std::string(lock));
  return it == highest_.end() ? 0 : it->second.first;
}

}  // namespace warden
