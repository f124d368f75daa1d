#include "engines/etcd/request_slots.h"

#include <functional>

namespace warden::engines::etcd {

std::uint32_t RequestSlots::take(const std::string& lock) {
  std::lock_guard guard(mu_);
  std::vector<std::uint32_t>& used = used_[std::hash<std::string>{}(lock)];
  std::uint32_t slot = 0;
  auto at = used.begin();
  for (; at != used.end() && *at == slot; ++at) ++slot;  // the first gap is the smallest
  used.insert(at, slot);
  return slot;
}

void RequestSlots::give_back(const std::string& lock, std::uint32_t slot) {
  std::lock_guard guard(mu_);
  const auto it = used_.find(std::hash<std::string>{}(lock));
  if (it == used_.end()) return;
  std::erase(it->second, slot);
  if (it->second.empty()) used_.erase(it);
}

}  // namespace warden::engines::etcd
