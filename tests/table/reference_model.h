// tests/table/reference_model.h — the lock table's rules, restated as naively as possible.
//
// The property test runs random calls against LockTable and this model side by side.
// The model has no heap, no slots, no index and no lazy deletion: every call scans every
// key, so it is slow and obviously follows the rules. It names grants by request id, not
// by token (the test maps tokens to ids), and draws its own tokens only to order
// expiries that fall on the same instant the way the table does (by grant order).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "table/lock_table.h"

namespace warden::table::testing {

class ReferenceModel {
 public:
  struct Holder {
    RequestId id;
    Mode mode;
    Time expires;
    std::uint64_t session;
    milliseconds lock_delay;
    std::uint64_t order;  // grant order
    std::uint32_t permits = 0;  // a semaphore's
  };
  struct Waiter {
    RequestId id;
    Mode mode;
    Time deadline;
    std::uint64_t session;
    milliseconds ttl;
    milliseconds lock_delay;
    std::uint32_t permits = 0;  // a semaphore's
  };
  struct Key {
    std::vector<Holder> holders;
    std::vector<Waiter> queue;
    std::optional<Time> delayed_until;
    std::uint32_t capacity = 0;  // a semaphore's permits; 0: a lock
  };
  struct ModelEvent {
    Event::Kind kind;
    RequestId id;
    std::string key;
    Mode mode;
    Time expires;  // granted, expired; Time{} for timed_out
    std::uint64_t session;
    bool operator==(const ModelEvent&) const = default;
    // Readable failure messages.
    friend std::ostream& operator<<(std::ostream& out, const ModelEvent& e) {
      static constexpr const char* kNames[] = {"granted", "timed_out", "expired"};
      return out << kNames[static_cast<int>(e.kind)] << " id=" << e.id << " " << e.key << " "
                 << (e.mode == Mode::exclusive ? "X" : "S")
                 << " expires=" << e.expires.time_since_epoch().count() << " session=" << e.session;
    }
  };
  struct Result {
    AcquireStatus status;
    RequestId id = 0;
    Time expires{};
  };

  Result acquire(const Request& r, Time now) {
    now = advance(now);
    Key* k = find(r.key);
    // A key is a lock or a semaphore of one capacity while it exists.
    if (r.capacity > 0 && (r.permits == 0 || r.permits > r.capacity)) {
      return Result{AcquireStatus::mismatch};
    }
    if (k != nullptr && k->capacity != r.capacity) return Result{AcquireStatus::mismatch};
    const Mode mode = r.capacity > 0 ? Mode::shared : r.mode;
    bool blocked = k != nullptr && k->delayed_until.has_value();
    bool compatible = k == nullptr || fits(*k, mode, r.permits);
    bool nobody_waits = k == nullptr || k->queue.empty();
    if (!blocked && compatible && (!r.fair || nobody_waits)) {
      Key& key = keys[r.key];
      key.capacity = r.capacity;
      Holder h{++last_id_, mode, now + r.ttl, r.session, r.lock_delay, ++order_, r.permits};
      key.holders.push_back(h);
      return Result{AcquireStatus::granted, h.id, h.expires};
    }
    if (r.deadline <= now) return Result{AcquireStatus::busy};
    Key& key = keys[r.key];
    key.capacity = r.capacity;
    key.queue.push_back(
        Waiter{++last_id_, mode, r.deadline, r.session, r.ttl, r.lock_delay, r.permits});
    return Result{AcquireStatus::queued, last_id_};
  }

  bool cancel(RequestId id, Time now) {
    now = advance(now);
    for (auto& [name, k] : keys) {
      auto it =
          std::find_if(k.queue.begin(), k.queue.end(), [&](const Waiter& w) { return w.id == id; });
      if (it == k.queue.end()) continue;
      k.queue.erase(it);
      std::string copy = name;
      serve(copy, now);
      tidy();
      return true;
    }
    return false;
  }

  std::size_t cancel_session(std::uint64_t session, Time now) {
    now = advance(now);
    std::size_t n = 0;
    for (auto& [name, k] : keys) {
      n += std::erase_if(k.queue, [&](const Waiter& w) { return w.session == session; });
    }
    for (auto& [name, k] : keys) serve(name, now);
    tidy();
    return n;
  }

  std::optional<Time> renew(const std::string& key, RequestId id, milliseconds ttl, Time now) {
    now = advance(now);
    Key* k = find(key);
    if (k == nullptr) return std::nullopt;
    for (Holder& h : k->holders) {
      if (h.id == id) return h.expires = now + ttl;
    }
    return std::nullopt;
  }

  bool release(const std::string& key, RequestId id, Time now) {
    now = advance(now);
    Key* k = find(key);
    if (k == nullptr) return false;
    if (std::erase_if(k->holders, [&](const Holder& h) { return h.id == id; }) == 0) return false;
    serve(key, now);
    tidy();
    return true;
  }

  // Returns the effective `now`.
  Time advance(Time now) {
    latest_ = std::max(latest_, now);
    now = latest_;
    for (auto& [name, k] : keys) {
      // Everything due, in time order; at one instant expiries come before deadlines,
      // each in grant / request order.
      std::vector<std::tuple<Time, int, std::uint64_t>> due;
      for (const Holder& h : k.holders) {
        if (h.expires <= now) due.emplace_back(h.expires, 0, h.order);
      }
      for (const Waiter& w : k.queue) {
        if (w.deadline <= now) due.emplace_back(w.deadline, 1, w.id);
      }
      std::sort(due.begin(), due.end());
      for (const auto& item : due) {
        const int kind = std::get<1>(item);
        const std::uint64_t ref = std::get<2>(item);  // a plain variable: lambdas capture it
        if (kind == 0) {
          auto it = std::find_if(k.holders.begin(), k.holders.end(),
                                 [&](const Holder& h) { return h.order == ref; });
          events.push_back(
              {Event::Kind::expired, it->id, name, it->mode, it->expires, it->session});
          Time end = it->expires + it->lock_delay;
          if (it->lock_delay > milliseconds::zero() && end > now) {
            k.delayed_until = std::max(k.delayed_until.value_or(end), end);
          }
          k.holders.erase(it);
        } else {
          auto it = std::find_if(k.queue.begin(), k.queue.end(),
                                 [&](const Waiter& w) { return w.id == ref; });
          events.push_back({Event::Kind::timed_out, it->id, name, it->mode, Time{}, it->session});
          k.queue.erase(it);
        }
      }
      if (k.delayed_until && *k.delayed_until <= now) k.delayed_until.reset();
    }
    for (auto& [name, k] : keys) serve(name, now);
    tidy();
    return now;
  }

  std::optional<Time> next_wakeup() const {
    std::optional<Time> next;
    auto consider = [&](Time t) {
      if (t != Time::max() && (!next || t < *next)) next = t;
    };
    for (const auto& [name, k] : keys) {
      for (const Holder& h : k.holders) consider(h.expires);
      for (const Waiter& w : k.queue) consider(w.deadline);
      if (k.delayed_until) consider(*k.delayed_until);
    }
    return next;
  }

  const Key* find(const std::string& key) const {
    auto it = keys.find(key);
    return it == keys.end() ? nullptr : &it->second;
  }

  Key* find(const std::string& key) {
    auto it = keys.find(key);
    return it == keys.end() ? nullptr : &it->second;
  }

  std::map<std::string, Key> keys;
  std::vector<ModelEvent> events;

 private:
  static bool fits(const Key& k, Mode mode, std::uint32_t permits) {
    if (k.capacity > 0) {
      std::uint64_t held = permits;
      for (const Holder& h : k.holders) held += h.permits;
      return held <= k.capacity;
    }
    if (k.holders.empty()) return true;
    if (mode == Mode::exclusive) return false;
    return std::all_of(k.holders.begin(), k.holders.end(),
                       [](const Holder& h) { return h.mode == Mode::shared; });
  }

  // Grants from the head of the queue while the head fits and no lock-delay runs.
  void serve(const std::string& name, Time now) {
    Key* k = find(name);
    if (k == nullptr || k->delayed_until) return;
    while (!k->queue.empty() && fits(*k, k->queue.front().mode, k->queue.front().permits)) {
      Waiter w = k->queue.front();
      k->queue.erase(k->queue.begin());
      Holder h{w.id, w.mode, now + w.ttl, w.session, w.lock_delay, ++order_, w.permits};
      k->holders.push_back(h);
      events.push_back({Event::Kind::granted, h.id, name, h.mode, h.expires, h.session});
    }
  }

  void tidy() {
    std::erase_if(keys, [](const auto& kv) {
      const Key& k = kv.second;
      return k.holders.empty() && k.queue.empty() && !k.delayed_until;
    });
  }

  RequestId last_id_ = 0;
  std::uint64_t order_ = 0;
  Time latest_ = Time::min();
};

}  // namespace warden::table::testing
