// core/recent_map.h — a map that keeps only its most recently used entries.
//
// For what an engine caches per lock name and can always look up again (a registry id,
// a semaphore's last settled capacity): a client that locks per user or per order names
// millions of locks over its life, and must not keep every one it ever used. Past
// `capacity` entries, the least recently used one is forgotten; a lookup that misses asks
// the backend again, as the first did.
//
// Not thread-safe: the engine guards it with its own mutex, as it did the std::map.
#pragma once

#include <cstddef>
#include <list>
#include <optional>
#include <unordered_map>
#include <utility>

namespace warden::core {

template <class Key, class Value>
class RecentMap {
 public:
  // A few thousand lock names cover every lock a client uses at once many times over.
  static constexpr std::size_t kDefaultCapacity = 4096;

  explicit RecentMap(std::size_t capacity = kDefaultCapacity)
      : capacity_(capacity == 0 ? 1 : capacity) {}

  // The value of `key`, which becomes the most recently used; nullopt if not kept.
  std::optional<Value> find(const Key& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Sets `key` to `value` as the most recently used, forgetting the least recently used
  // entry if that makes one too many.
  void put(const Key& key, Value value) {
    if (const auto it = index_.find(key); it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

  void erase(const Key& key) {
    if (const auto it = index_.find(key); it != index_.end()) {
      order_.erase(it->second);
      index_.erase(it);
    }
  }

  std::size_t size() const { return order_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  using Order = std::list<std::pair<Key, Value>>;  // most recently used first
  std::size_t capacity_;
  Order order_;
  std::unordered_map<Key, typename Order::iterator> index_;
};

}  // namespace warden::core
