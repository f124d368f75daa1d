// table/inline_one_vector.h — a vector that keeps its first element inside itself.
//
// The lock table keeps each key's requests in one of these (lock_table.cc). Most keys
// have exactly one request, their holder: kept inline, it needs no allocation of its
// own: the KeyState is 40 bytes larger than with a std::vector, and the 64-byte malloc
// chunk of the vector's one element is gone (32 bytes a held lock less, measured). A
// second request moves them all to the heap, where the vector grows by doubling like
// std::vector.
//
// Only what the table needs: contiguous storage (pointers are the iterators), insert and
// erase anywhere, push_back, and shrink_to_fit, which brings a lone element back inline.
// T must be trivially copyable, so elements move with memcpy/memmove.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

namespace warden::table {

template <class T>
class InlineOneVector {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  InlineOneVector() noexcept {}
  InlineOneVector(const InlineOneVector& other) { assign(other); }
  InlineOneVector(InlineOneVector&& other) noexcept { take(other); }
  InlineOneVector& operator=(const InlineOneVector& other) {
    if (this != &other) {
      release();
      assign(other);
    }
    return *this;
  }
  InlineOneVector& operator=(InlineOneVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~InlineOneVector() { release(); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t capacity() const noexcept { return capacity_; }

  T* data() noexcept { return inline_() ? &one_ : heap_; }
  const T* data() const noexcept { return inline_() ? &one_ : heap_; }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size_; }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size_; }
  T& operator[](std::size_t i) noexcept { return data()[i]; }
  const T& operator[](std::size_t i) const noexcept { return data()[i]; }

  void push_back(const T& value) { insert(end(), value); }

  // Inserts `value` before `at`; returns where it now is.
  T* insert(T* at, const T& value) {
    const std::size_t index = static_cast<std::size_t>(at - data());
    const T copy = value;  // `value` may live in this vector, which may move
    if (size_ == capacity_) grow(capacity_ * 2);
    T* base = data();
    std::memmove(static_cast<void*>(base + index + 1), base + index, (size_ - index) * sizeof(T));
    base[index] = copy;
    ++size_;
    return base + index;
  }

  T* erase(T* at) { return erase(at, at + 1); }

  // Removes [first, last); returns where the element after them now is.
  T* erase(T* first, T* last) {
    T* base = data();
    const std::size_t from = static_cast<std::size_t>(first - base);
    const std::size_t count = static_cast<std::size_t>(last - first);
    std::memmove(static_cast<void*>(base + from), base + from + count,
                 (size_ - from - count) * sizeof(T));
    size_ -= static_cast<std::uint32_t>(count);
    return base + from;
  }

  // Gives back spare heap room; a vector of at most one element goes back inline.
  void shrink_to_fit() {
    if (inline_() || size_ == capacity_) return;
    T* heap = heap_;
    if (size_ <= 1) {
      if (size_ == 1) std::memcpy(static_cast<void*>(&one_), heap, sizeof(T));
      capacity_ = 1;
    } else {
      heap_ = allocate(size_);
      std::memcpy(static_cast<void*>(heap_), heap, size_ * sizeof(T));
      capacity_ = size_;
    }
    ::operator delete(heap);
  }

 private:
  bool inline_() const noexcept { return capacity_ == 1; }

  static T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T))); }

  void grow(std::size_t capacity) {
    T* heap = allocate(capacity);
    std::memcpy(static_cast<void*>(heap), data(), size_ * sizeof(T));
    if (!inline_()) ::operator delete(heap_);
    heap_ = heap;
    capacity_ = static_cast<std::uint32_t>(capacity);
  }

  void release() noexcept {
    if (!inline_()) ::operator delete(heap_);
    size_ = 0;
    capacity_ = 1;
  }

  void assign(const InlineOneVector& other) {
    if (other.size_ > 1) grow(other.size_);
    std::memcpy(static_cast<void*>(data()), other.data(), other.size_ * sizeof(T));
    size_ = other.size_;
  }

  void take(InlineOneVector& other) noexcept {
    if (other.inline_()) {
      std::memcpy(static_cast<void*>(&one_), &other.one_, sizeof(T));
    } else {
      heap_ = other.heap_;
    }
    size_ = other.size_;
    capacity_ = other.capacity_;
    other.size_ = 0;
    other.capacity_ = 1;
  }

  union {
    T one_;    // while capacity_ == 1
    T* heap_;  // while capacity_ > 1
  };
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = 1;
};

}  // namespace warden::table
