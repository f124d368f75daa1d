// table/key_map.h — a hash map from string keys to V whose nodes carry the key's bytes.
//
// The lock table's map of keys (lock_table.cc). A std::unordered_map<std::string, V>
// node holds a std::string, 32 bytes that point, for any key longer than 15 bytes, to a
// heap block of its own: 48 bytes of malloc chunk for a 26-byte key. Here the key's bytes
// follow the node's last field in the same allocation, so a lock with a 26-byte key costs
// one 128-byte chunk where it cost a 128-byte node and a 48-byte key block.
//
// Chained hashing over a power-of-two bucket array, load factor at most 1, the hash not
// stored (a rehash computes it again). Nodes never move: a Node* stays valid until its
// key is erased, which the table's slots rely on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace warden::table {

template <class V>
class KeyMap {
 public:
  struct Node {
    V value;
    Node* next;
    std::uint32_t key_size;
    // key_size bytes of key follow here, in the same allocation (kKeyAt).

    std::string_view key() const noexcept {
      return {reinterpret_cast<const char*>(this) + kKeyAt, key_size};
    }
  };

  KeyMap() = default;
  KeyMap(const KeyMap&) = delete;
  KeyMap& operator=(const KeyMap&) = delete;
  ~KeyMap() {
    for (Node* head : buckets_) {
      while (head != nullptr) destroy(std::exchange(head, head->next));
    }
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  Node* find(std::string_view key) const noexcept {
    if (buckets_.empty()) return nullptr;
    for (Node* n = buckets_[bucket_of(key)]; n != nullptr; n = n->next) {
      if (n->key() == key) return n;
    }
    return nullptr;
  }

  // The node of `key`, made with a value-initialised V if there was none; second: made.
  std::pair<Node*, bool> try_emplace(std::string_view key) {
    if (Node* found = find(key)) return {found, false};
    if (size_ + 1 > buckets_.size()) rehash(buckets_.empty() ? 16 : 2 * buckets_.size());
    Node* node = make(key);
    Node*& head = buckets_[bucket_of(key)];
    node->next = head;
    head = node;
    ++size_;
    return {node, true};
  }

  // Erases the node (of this map) and its value.
  void erase(Node* node) noexcept {
    Node** link = &buckets_[bucket_of(node->key())];
    while (*link != node) link = &(*link)->next;
    *link = node->next;
    destroy(node);
    --size_;
  }

  // Calls f(const Node&) for every node, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const Node* head : buckets_) {
      for (const Node* n = head; n != nullptr; n = n->next) f(*n);
    }
  }

 private:
  static_assert(std::is_standard_layout_v<Node>);
  // Where the key's bytes start: right after key_size, in the node's tail padding.
  static constexpr std::size_t kKeyAt = offsetof(Node, key_size) + sizeof(std::uint32_t);

  std::size_t bucket_of(std::string_view key) const noexcept {
    return std::hash<std::string_view>{}(key) & (buckets_.size() - 1);
  }

  static Node* make(std::string_view key) {
    // Room for the whole Node (its padding included) or for the key, whichever ends later.
    const std::size_t bytes = std::max(sizeof(Node), kKeyAt + key.size());
    void* raw = ::operator new(bytes);
    Node* node = ::new (raw) Node{V{}, nullptr, static_cast<std::uint32_t>(key.size())};
    std::memcpy(reinterpret_cast<char*>(raw) + kKeyAt, key.data(), key.size());
    return node;
  }

  static void destroy(Node* node) noexcept {
    node->~Node();
    ::operator delete(static_cast<void*>(node));
  }

  void rehash(std::size_t count) {
    std::vector<Node*> old(count, nullptr);
    old.swap(buckets_);
    for (Node* head : old) {
      while (head != nullptr) {
        Node* node = std::exchange(head, head->next);
        Node*& into = buckets_[bucket_of(node->key())];
        node->next = into;
        into = node;
      }
    }
  }

  std::vector<Node*> buckets_;
  std::size_t size_ = 0;
};

}  // namespace warden::table
