#include "core/lock_cache.h"

#include <utility>

namespace warden::core {

using detail::Hold;

namespace {
// Revokes remembered for grants not (yet) cached: a few per cached lock at most. Ones
// that never find their grant (it was released for real first) are dropped oldest-first
// beyond this many per slot of capacity.
constexpr std::size_t kRevokesPerSlot = 4;
}  // namespace

LockCache::LockCache(std::size_t capacity, std::chrono::milliseconds idle, GiveBack give_back)
    : capacity_(capacity), idle_(idle), give_back_(std::move(give_back)) {}

LockCache::~LockCache() { stop_sweeping(); }

void LockCache::stop_sweeping() {
  std::jthread sweeper;
  {
    std::lock_guard guard(mu_);
    stopped_ = true;
    sweeper.swap(sweeper_);
  }
  // Joined outside mu_: the sweeper takes it to finish its round.
  if (sweeper.joinable()) {
    sweeper.request_stop();
    sweeper.join();
  }
}

std::uint64_t LockCache::epoch() const {
  std::lock_guard guard(mu_);
  return epoch_;
}

LockCache::Taken LockCache::take(const std::string& lock, Mode mode, std::chrono::milliseconds ttl,
                                 std::chrono::milliseconds lock_delay) {
  Taken taken;
  std::lock_guard guard(mu_);
  const auto it = entries_.find(lock);
  if (it == entries_.end()) return taken;
  auto parked = std::move(it->second.parked);
  entries_.erase(it);
  // A grant in the other mode would serve this request wrongly (a shared grant cannot
  // be counted exclusive; an exclusive one would keep other shared holders out), and a
  // lost one serves nobody, and one asked with another lease length or lock delay
  // would give the request what it did not ask for: the caller gives it back and asks
  // the backend.
  if (parked->grant.mode == mode && parked->state() == Hold::State::active &&
      parked->caching.ttl == ttl && parked->caching.lock_delay == lock_delay) {
    taken.hit = std::move(parked);
  } else {
    taken.give_back.push_back(std::move(parked));
  }
  return taken;
}

LockCache::Holds LockCache::park(std::shared_ptr<Hold> parked) {
  Holds out;
  std::unique_lock lock(mu_);
  const std::string& name = parked->grant.key.joined();
  if (parked->caching.epoch < epoch_) {
    out.push_back(std::move(parked));
    return out;
  }
  if (take_revoke(name, parked->grant.token)) {
    out.push_back(std::move(parked));
    return out;
  }
  if (entries_.size() >= capacity_ && !entries_.contains(name)) {
    const auto victim = oldest();
    out.push_back(std::move(victim->second.parked));
    entries_.erase(victim);
  }
  auto& entry = entries_[name];
  // A thread can only park the grant it took out, so the slot is free; should it not be
  // (the same lock cached twice), the older grant goes back.
  if (entry.parked) out.push_back(std::move(entry.parked));
  entry = Entry{std::move(parked), Clock::now()};
  if (!sweeper_.joinable() && !stopped_) {
    sweeper_ = std::jthread([this](std::stop_token stop) { sweep_loop(stop); });
  }
  return out;
}

bool LockCache::revoked(const Hold& hold) {
  std::lock_guard guard(mu_);
  if (hold.caching.epoch < epoch_) return true;
  return take_revoke(hold.grant.key.joined(), hold.grant.token);
}

void LockCache::remember_revoke(const std::string& lock, std::uint64_t token) {
  // Revokes whose grant was released for real before they came never find it: past the
  // bound, the oldest of some lock goes (tokens of one lock only grow).
  if (revoked_count_ >= capacity_ * kRevokesPerSlot && !revoked_.empty()) {
    auto oldest = revoked_.begin();
    oldest->second.erase(oldest->second.begin());
    --revoked_count_;
    if (oldest->second.empty()) revoked_.erase(oldest);
  }
  if (revoked_[lock].insert(token).second) ++revoked_count_;
}

bool LockCache::take_revoke(const std::string& lock, std::uint64_t token) {
  const auto it = revoked_.find(lock);
  if (it == revoked_.end() || it->second.erase(token) == 0) return false;
  --revoked_count_;
  if (it->second.empty()) revoked_.erase(it);
  return true;
}

LockCache::Holds LockCache::revoke(const std::string& lock, std::uint64_t token) {
  Holds out;
  std::lock_guard guard(mu_);
  const auto it = entries_.find(lock);
  if (it != entries_.end() && it->second.parked->grant.token == token) {
    out.push_back(std::move(it->second.parked));
    entries_.erase(it);
    return out;
  }
  remember_revoke(lock, token);
  return out;
}

LockCache::Holds LockCache::revoke_everything() {
  std::lock_guard guard(mu_);
  ++epoch_;
  Holds out;
  out.reserve(entries_.size());
  for (auto& [name, entry] : entries_) out.push_back(std::move(entry.parked));
  entries_.clear();
  revoked_.clear();
  revoked_count_ = 0;
  return out;
}

LockCache::Holds LockCache::drain() {
  std::lock_guard guard(mu_);
  Holds out;
  out.reserve(entries_.size());
  for (auto& [name, entry] : entries_) out.push_back(std::move(entry.parked));
  entries_.clear();
  return out;
}

std::size_t LockCache::size() const {
  std::lock_guard guard(mu_);
  return entries_.size();
}

std::map<std::string, LockCache::Entry>::iterator LockCache::oldest() {
  auto best = entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.idle_since < best->second.idle_since) best = it;
  }
  return best;
}

void LockCache::sweep_loop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    const auto now = Clock::now();
    Holds idle;
    auto next = now + idle_;
    for (auto it = entries_.begin(); it != entries_.end();) {
      const auto due = it->second.idle_since + idle_;
      if (due <= now) {
        idle.push_back(std::move(it->second.parked));
        it = entries_.erase(it);
      } else {
        next = std::min(next, due);
        ++it;
      }
    }
    if (!idle.empty()) {
      lock.unlock();
      give_back_(std::move(idle));
      lock.lock();
      continue;
    }
    changed_.wait_until(lock, stop, next, [] { return false; });
  }
}

}  // namespace warden::core
