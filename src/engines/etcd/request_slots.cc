#include "engines/etcd/request_slots.h"

namespace warden::engines::etcd {

std::uint32_t RequestSlots::take(const std::string& lock) {
  std::lock_guard guard(mu_);
  std::set<std::uint32_t>& used = used_[lock];
  std::uint32_t slot = 0;
  for (const std::uint32_t taken : used) {  // ascending: the first gap is the smallest
    if (taken != slot) break;
    ++slot;
  }
  used.insert(slot);
  return slot;
}

void RequestSlots::give_back(const std::string& lock, std::uint32_t slot) {
  std::lock_guard guard(mu_);
  const auto it = used_.find(lock);
  if (it == used_.end()) return;
  it->second.erase(slot);
  if (it->second.empty()) used_.erase(it);
}

}  // namespace warden::engines::etcd
