// table/lock_table.cc — the lock table: per-key FIFO queues, leases and lock-delay.
//
// Layout
//   keys       key → KeyState (key_map.h: a hash map whose nodes carry the key's bytes).
//              A KeyState keeps its holders and waiters in one vector: holders first
//              (grant order), then waiters (queue order). Granting the head waiter is then
//              a change in place, and a key with one holder keeps it inside the KeyState
//              (inline_one_vector.h), with no allocation of its own.
//   slots      slot number → map node. A key gets a slot for its lifetime, so timers can
//              name it with 4 bytes and still be checked safely after the key is gone
//              (a freed slot is null; a reused slot holds another key, which a stale timer
//              cannot match because tokens and request ids are never reused).
//   waiting    queued request id → slot, for cancel() and waiter deadlines. Waiters only.
//   semaphores slot → capacity and permits held, for the keys that are semaphores only,
//              so that a lock pays nothing for them.
//   delays     slot → end of the lock-delay running on that key, for those keys only
//              (looked up only while there is one).
//   sets       queued set request id → its member keys' slots, in member order. A set's
//              members are waiters of one id in each of those keys (`waiting` maps the id
//              to the first member's slot); a lock pays one empty() check for them.
//   timers     one binary min-heap of lease expiries, waiter deadlines and lock-delay ends.
//              Entries are never removed early: an entry is stale when what it names is
//              gone or has another time, and is skipped when popped. The heap is compacted
//              when stale entries outnumber live ones, so churn cannot grow it without
//              bound, and stale entries are popped off the top after every call so that
//              next_wakeup() is exact.
//
// Memory per lock with one holder and no waiter (libstdc++, glibc malloc, 64-bit):
//   map node: KeyState with its one Entry inline (64 B), next pointer, key
//   length and the key's bytes (76 B + key; a key of up to 28 bytes)       112 B chunk
//   bucket array at load factor <= 1                                         8..16 B
//   slot pointer (vector, up to 2x capacity)                                 8..16 B
//   timer entry (24 B) and the heap vector's spare capacity                  24..48 B
//   stale timers (out-of-order renewals) until the next compaction           0..24 B
// The Entry keeps its ttl and lock-delay in 4 bytes each (Ms32), and a running
// lock-delay's end lives in `delays`, not in every KeyState: together 16 bytes, which
// take the node from a 128-byte chunk down to a 112-byte one.
// Measured through wardend with 1,000,000 locks and 26-byte keys (docs/performance.md):
// 152.6 B per lock, where a std::unordered_map<std::string, …> node with the requests in
// a std::vector took 251.8 (a 96 B node, a 64 B chunk for the vector's one Entry and a
// 48 B chunk for the key). A key that has had a waiter keeps its requests on the heap,
// like a std::vector, until it is gone; each waiter adds an Entry and a `waiting` node
// (~90 B).
#include "table/lock_table.h"

#include <algorithm>
#include <functional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "table/inline_one_vector.h"
#include "table/key_map.h"

namespace warden::table {
namespace {

// Marks "no lock-delay running".
constexpr Time kNoDelay = Time::min();

// t + d, or Time::max() if that does not fit; d <= 0 gives t. Leases and lock-delays
// measured in milliseconds::max() must mean "forever", not wrap into the past.
Time add_saturating(Time t, milliseconds d) {
  if (d <= milliseconds::zero()) return t;
  constexpr auto kMaxMs = std::chrono::duration_cast<milliseconds>(Time::duration::max());
  if (d >= kMaxMs) return Time::max();
  const auto step = std::chrono::duration_cast<Time::duration>(d);
  if (t > Time::max() - step) return Time::max();
  return t + step;
}

// A duration of whole milliseconds in 4 bytes, for the per-request fields: up to 49.7
// days, far beyond any ttl (7 days) or lock-delay (1 hour) a request can carry over the
// protocol. A longer one is kept as milliseconds::max() ("forever", see add_saturating),
// and one below zero as zero, which add_saturating treats alike.
class Ms32 {
 public:
  Ms32(milliseconds d)  // NOLINT(google-explicit-constructor): stands in for milliseconds
      : ms_(d.count() <= 0          ? 0
            : d.count() >= kForever ? kForever
                                    : static_cast<std::uint32_t>(d.count())) {}
  operator milliseconds() const {  // NOLINT(google-explicit-constructor)
    return ms_ == kForever ? milliseconds::max() : milliseconds(ms_);
  }
  bool positive() const { return ms_ > 0; }

 private:
  static constexpr std::uint32_t kForever = 0xffffffffU;
  std::uint32_t ms_;
};

}  // namespace

struct LockTable::Impl {
  // One request on a key: a waiter until granted, then a holder (its place in
  // KeyState::entries says which).
  struct Entry {
    RequestId id;
    std::uint64_t session;
    std::uint64_t token;  // once held
    Time time;            // lease expiry once held; deadline while waiting
    Ms32 ttl;             // lease length to give when granted
    Ms32 lock_delay;
    Mode mode;
    std::uint32_t permits;  // of a semaphore; 0 on a lock
  };

  struct KeyState {
    InlineOneVector<Entry> entries;  // [0, holders): holders; then waiters, head first
    std::uint32_t holders = 0;
    std::uint32_t slot = 0;
    // A running lock-delay's end is kept in Impl::delays: few keys have one.
  };

  // The per-lock memory budget (see the top of this file) rests on these sizes.
  static_assert(sizeof(void*) != 8 || sizeof(Entry) <= 48);
  static_assert(sizeof(void*) != 8 || sizeof(KeyState) <= 64);

  struct Semaphore {
    std::uint32_t capacity;
    std::uint32_t held = 0;  // the permits of its holders
  };

  using Keys = KeyMap<KeyState>;
  using Node = Keys::Node;

  enum class TimerKind : std::uint8_t { lease, deadline, delay };
  struct Timer {
    Time time;
    std::uint64_t ref;   // lease: token; deadline: request id; delay: token that caused it
    std::uint32_t slot;  // lease, delay: the key's slot
    TimerKind kind;
  };
  static_assert(sizeof(void*) != 8 || sizeof(Timer) <= 24);

  // Heap order: earliest first. Ties go expiries, then deadlines, then delay ends, each
  // by token or id, so that replaying the same calls gives the same events.
  static bool later(const Timer& a, const Timer& b) {
    return std::tie(a.time, a.kind, a.ref, a.slot) > std::tie(b.time, b.kind, b.ref, b.slot);
  }

  explicit Impl(TokenSource* source) : tokens(source != nullptr ? source : &own_tokens) {}

  // --- constant after construction
  CountingTokenSource own_tokens;
  TokenSource* const tokens;

  // --- state
  Keys keys;
  std::vector<Node*> slots;
  std::vector<std::uint32_t> free_slots;
  std::unordered_map<RequestId, std::uint32_t> waiting;
  std::unordered_map<std::uint32_t, Semaphore> semaphores;
  std::unordered_map<RequestId, std::vector<std::uint32_t>> sets;
  std::unordered_map<RequestId, std::string> values;  // requests that carry a value
  std::vector<Timer> timers;
  std::vector<Event> events;
  std::vector<std::uint32_t> dirty;  // keys whose queue may have become grantable
  std::size_t holder_count = 0;
  std::unordered_map<std::uint32_t, Time> delays;  // slot -> end of its running lock-delay
  // While recording (a wardend cell's leader): the keys whose holders or lock-delay
  // changed, in order, repeats included, until taken.
  bool recording = false;
  std::vector<std::string> changed;
  RequestId last_id = 0;
  Time latest = Time::min();

  // --- keys

  Node* find_node(std::string_view key) { return keys.find(key); }
  const Node* find_node(std::string_view key) const { return keys.find(key); }

  // The holders of the key in `slot`, or their leases, values or lock-delay, changed.
  void note_changed(std::uint32_t slot) {
    if (recording) changed.emplace_back(slots[slot]->key());
  }

  Node& create(std::string_view key) {
    Node& node = *keys.try_emplace(key).first;
    if (free_slots.empty()) {
      node.value.slot = static_cast<std::uint32_t>(slots.size());
      slots.push_back(&node);
    } else {
      node.value.slot = free_slots.back();
      free_slots.pop_back();
      slots[node.value.slot] = &node;
    }
    return node;
  }

  // The end of the lock-delay running on `k`, or kNoDelay. A lookup only while some
  // key has one.
  Time delayed_until(const KeyState& k) const {
    if (delays.empty()) return kNoDelay;
    const auto it = delays.find(k.slot);
    return it == delays.end() ? kNoDelay : it->second;
  }

  // Forgets the key if nothing refers to it any more.
  void settle(Node& node) {
    KeyState& k = node.value;
    if (k.entries.empty() && delayed_until(k) == kNoDelay) {
      semaphores.erase(k.slot);
      slots[k.slot] = nullptr;
      free_slots.push_back(k.slot);
      keys.erase(&node);
      return;
    }
    // A queue that drained should not pin its peak capacity for the key's lifetime.
    if (k.entries.capacity() > 16 && k.entries.size() < k.entries.capacity() / 4) {
      k.entries.shrink_to_fit();
    }
  }

  const Semaphore* semaphore_of(const KeyState& k) const {
    auto it = semaphores.find(k.slot);
    return it == semaphores.end() ? nullptr : &it->second;
  }

  // Whether a request may touch the key at all: a semaphore's request names its
  // capacity and asks for 1..capacity permits; a lock's request is no semaphore's.
  bool matches(const Node* node, const Request& r) const {
    if (r.capacity > 0 && (r.permits == 0 || r.permits > r.capacity)) return false;
    if (node == nullptr) return true;
    const Semaphore* sem = semaphore_of(node->value);
    return sem == nullptr ? r.capacity == 0 : r.capacity == sem->capacity;
  }

  // Whether a request of `mode` (a lock) or for `permits` (a semaphore) could be held
  // beside the key's holders now.
  bool compatible(const KeyState& k, Mode mode, std::uint32_t permits) const {
    if (const Semaphore* sem = semaphore_of(k)) return sem->held + permits <= sem->capacity;
    return k.holders == 0 || (mode == Mode::shared && k.entries[0].mode == Mode::shared);
  }

  // A new key for `r`, a semaphore's with its capacity.
  Node& create_for(const Request& r) {
    Node& node = create(r.key);
    if (r.capacity > 0) semaphores.emplace(node.value.slot, Semaphore{r.capacity});
    return node;
  }

  static Mode mode_of(const Request& r) { return r.capacity > 0 ? Mode::shared : r.mode; }

  static Grant grant_of(const Node& node, const Entry& e) {
    return Grant{
        e.id, std::string(node.key()), e.mode, e.token, e.time, e.session, e.lock_delay, e.permits};
  }

  std::size_t find_holder(const KeyState& k, std::uint64_t token) const {
    for (std::size_t i = 0; i < k.holders; ++i) {
      if (k.entries[i].token == token) return i;
    }
    return k.entries.size();
  }

  std::size_t find_waiter(const KeyState& k, RequestId id) const {
    for (std::size_t i = k.holders; i < k.entries.size(); ++i) {
      if (k.entries[i].id == id) return i;
    }
    return k.entries.size();
  }

  void forget_value(RequestId id) {
    if (!values.empty()) values.erase(id);
  }

  void remove_holder(KeyState& k, std::size_t i) {
    note_changed(k.slot);
    if (k.entries[i].permits > 0) semaphores.at(k.slot).held -= k.entries[i].permits;
    forget_value(k.entries[i].id);
    k.entries.erase(k.entries.begin() + static_cast<std::ptrdiff_t>(i));
    --k.holders;
    --holder_count;
  }

  void remove_waiter(KeyState& k, std::size_t i) {
    waiting.erase(k.entries[i].id);
    forget_value(k.entries[i].id);
    k.entries.erase(k.entries.begin() + static_cast<std::ptrdiff_t>(i));
  }

  // Turns `e` (the head waiter, or a fresh entry placed after the holders) into a holder.
  // Callers draw `token` before changing anything: a TokenSource that persists its
  // reservations may throw, and the call must then leave the request as it was.
  void make_holder(KeyState& k, Entry& e, std::uint64_t token, Time now) {
    note_changed(k.slot);
    e.token = token;
    e.time = add_saturating(now, e.ttl);
    if (e.permits > 0) semaphores.at(k.slot).held += e.permits;
    ++k.holders;
    ++holder_count;
    if (e.time != Time::max()) push_timer({e.time, e.token, k.slot, TimerKind::lease});
  }

  // Grants the head of the queue, and the waiters behind it, while they are compatible
  // with the holders and no lock-delay runs. A shared head thereby takes the whole run of
  // shared waiters behind it; an exclusive waiter stops the run, as does a semaphore's
  // waiter whose permits do not fit yet.
  void pump(Node& node, Time now) {
    KeyState& k = node.value;
    if (delayed_until(k) > now) return;
    while (k.holders < k.entries.size()) {
      Entry& head = k.entries[k.holders];
      if (!sets.empty()) {
        if (auto set = sets.find(head.id); set != sets.end()) {
          if (!grant_set(set, now)) break;
          continue;
        }
      }
      if (!compatible(k, head.mode, head.permits)) break;
      std::uint64_t token = tokens->next();
      waiting.erase(head.id);
      make_holder(k, head, token, now);
      events.push_back(Event{Event::Kind::granted, grant_of(node, head)});
    }
  }

  void mark_dirty(std::uint32_t slot) { dirty.push_back(slot); }

  // Grants what became grantable on the touched keys and forgets idle ones. If the
  // TokenSource throws, the keys stay marked and the next call serves them.
  void flush_dirty(Time now) {
    // By index: granting a set marks its other keys, which are served in this pass.
    for (std::size_t i = 0; i < dirty.size(); ++i) {
      if (Node* node = slots[dirty[i]]) {
        pump(*node, now);
        settle(*node);
      }
    }
    dirty.clear();
  }

  // --- sets

  // Grants the queued set if it heads the queue of every member key, each compatible and
  // not delayed; false (nothing changes) otherwise.
  bool grant_set(std::unordered_map<RequestId, std::vector<std::uint32_t>>::iterator set,
                 Time now) {
    const RequestId id = set->first;
    const std::vector<std::uint32_t>& members = set->second;
    for (std::uint32_t slot : members) {
      const KeyState& k = slots[slot]->value;
      if (delayed_until(k) > now || k.holders == k.entries.size()) return false;
      const Entry& head = k.entries[k.holders];
      if (head.id != id || !compatible(k, head.mode, 0)) return false;
    }
    std::vector<std::uint64_t> drawn;  // all tokens first: a throwing source changes nothing
    drawn.reserve(members.size());
    for (std::size_t i = 0; i < members.size(); ++i) drawn.push_back(tokens->next());
    Event event{Event::Kind::set_granted, Grant{}, {}};
    event.grants.reserve(members.size());
    for (std::size_t i = 0; i < members.size(); ++i) {
      Node& node = *slots[members[i]];
      KeyState& k = node.value;
      Entry& member = k.entries[k.holders];
      member.id = ++last_id;  // each grant its own id; the set's id names the request
      make_holder(k, member, drawn[i], now);
      event.grants.push_back(grant_of(node, member));
      mark_dirty(k.slot);  // the run behind it may be grantable too
    }
    event.grant = event.grants.front();
    event.grant.id = id;
    waiting.erase(id);
    sets.erase(set);
    events.push_back(std::move(event));
    return true;
  }

  // Takes a queued set out of every member key's queue.
  void remove_set(RequestId id) {
    auto set = sets.find(id);
    for (std::uint32_t slot : set->second) {
      KeyState& k = slots[slot]->value;
      std::size_t i = find_waiter(k, id);
      k.entries.erase(k.entries.begin() + static_cast<std::ptrdiff_t>(i));
      mark_dirty(slot);
    }
    waiting.erase(id);
    sets.erase(set);
  }

  SetAcquireResult acquire_set(const SetRequest& r, Time now) {
    SetAcquireResult result{AcquireStatus::mismatch, 0, {}};
    if (r.members.empty()) return result;
    std::vector<Node*> nodes;
    nodes.reserve(r.members.size());
    bool grant_now = true;
    for (const SetRequest::Member& m : r.members) {
      for (const SetRequest::Member& other : r.members) {
        if (&other != &m && other.key == m.key) return result;
      }
      Node* node = find_node(m.key);
      if (node != nullptr) {
        const KeyState& k = node->value;
        if (semaphore_of(k) != nullptr) return result;
        const bool queue_empty = k.entries.size() == k.holders;
        grant_now = grant_now && delayed_until(k) <= now && compatible(k, m.mode, 0) &&
                    (!r.fair || queue_empty);
      }
      nodes.push_back(node);
    }
    result.status = AcquireStatus::busy;
    if (!grant_now && r.deadline <= now) return result;

    std::vector<std::uint64_t> drawn;
    if (grant_now) {
      for (std::size_t i = 0; i < r.members.size(); ++i) drawn.push_back(tokens->next());
    }
    result.id = ++last_id;
    std::vector<std::uint32_t> member_slots;
    member_slots.reserve(r.members.size());
    for (std::size_t i = 0; i < r.members.size(); ++i) {
      Node* node = nodes[i] != nullptr ? nodes[i] : &create(r.members[i].key);
      KeyState& k = node->value;
      Entry e{result.id, r.session, 0, r.deadline, r.ttl, r.lock_delay, r.members[i].mode, 0};
      if (grant_now) {
        e.id = ++last_id;  // each grant its own id, as when a queued set is granted
        auto at = k.entries.insert(k.entries.begin() + k.holders, e);
        make_holder(k, *at, drawn[i], now);
        result.grants.push_back(grant_of(*node, *at));
      } else {
        k.entries.push_back(e);
        member_slots.push_back(k.slot);
      }
    }
    if (grant_now) {
      result.status = AcquireStatus::granted;
      return result;
    }
    waiting.emplace(result.id, member_slots.front());
    sets.emplace(result.id, std::move(member_slots));
    if (r.deadline != Time::max()) push_timer({r.deadline, result.id, 0, TimerKind::deadline});
    result.status = AcquireStatus::queued;
    return result;
  }

  // --- timers

  bool live(const Timer& t) const {
    switch (t.kind) {
      case TimerKind::lease: {
        const Node* node = slots[t.slot];
        if (node == nullptr) return false;
        const KeyState& k = node->value;
        std::size_t i = find_holder(k, t.ref);
        return i < k.entries.size() && k.entries[i].time == t.time;
      }
      case TimerKind::deadline:
        return waiting.contains(t.ref);
      case TimerKind::delay: {
        const Node* node = slots[t.slot];
        return node != nullptr && delayed_until(node->value) == t.time;
      }
    }
    return false;
  }

  void push_timer(const Timer& t) {
    timers.push_back(t);
    std::push_heap(timers.begin(), timers.end(), later);
    // At most one live timer per holder, waiter and delayed key; more than twice that
    // means mostly stale entries (released leases, renewals, granted waiters). The
    // compaction costs O(n log n) once per n pushes, so O(log n) per push overall.
    if (timers.size() > 2 * (holder_count + waiting.size() + delays.size()) + 16) compact();
  }

  void compact() {
    std::erase_if(timers, [this](const Timer& t) { return !live(t); });
    // A lease renewed back to an earlier expiry has two live entries; keep one.
    std::sort(timers.begin(), timers.end(), later);
    timers.erase(
        std::unique(timers.begin(), timers.end(),
                    [](const Timer& a, const Timer& b) { return !later(a, b) && !later(b, a); }),
        timers.end());
    // Only a heap that shrank a lot gives memory back; otherwise the pushes that follow
    // would just grow it again.
    if (timers.capacity() > 4 * timers.size() + 64) timers.shrink_to_fit();
    std::make_heap(timers.begin(), timers.end(), later);
  }

  void fire(const Timer& t, Time now) {
    switch (t.kind) {
      case TimerKind::lease: {
        Node* node = slots[t.slot];
        if (node == nullptr) return;
        KeyState& k = node->value;
        std::size_t i = find_holder(k, t.ref);
        if (i == k.entries.size() || k.entries[i].time != t.time) return;
        const Entry e = k.entries[i];
        events.push_back(Event{Event::Kind::expired, grant_of(*node, e)});
        remove_holder(k, i);
        // Measured from the expiry, not from `now`: a late advance() must not lengthen it.
        Time end = add_saturating(e.time, e.lock_delay);
        if (e.lock_delay.positive() && end > now && end > delayed_until(k)) {
          delays[k.slot] = end;
          if (end != Time::max()) push_timer({end, e.token, k.slot, TimerKind::delay});
        }
        mark_dirty(k.slot);
        return;
      }
      case TimerKind::deadline: {
        auto it = waiting.find(t.ref);
        if (it == waiting.end()) return;
        if (!sets.empty() && sets.contains(t.ref)) {
          const Node& first = *slots[it->second];
          const Entry& e = first.value.entries[find_waiter(first.value, t.ref)];
          events.push_back(
              Event{Event::Kind::timed_out, Grant{e.id, std::string(first.key()), e.mode, 0, Time{},
                                                  e.session, e.lock_delay, 0}});
          remove_set(t.ref);
          return;
        }
        Node* node = slots[it->second];
        KeyState& k = node->value;
        std::size_t i = find_waiter(k, t.ref);
        const Entry& e = k.entries[i];
        events.push_back(
            Event{Event::Kind::timed_out, Grant{e.id, std::string(node->key()), e.mode, 0, Time{},
                                                e.session, e.lock_delay, e.permits}});
        remove_waiter(k, i);
        mark_dirty(k.slot);
        return;
      }
      case TimerKind::delay: {
        Node* node = slots[t.slot];
        if (node == nullptr || delayed_until(node->value) != t.time) return;
        note_changed(node->value.slot);
        delays.erase(node->value.slot);
        mark_dirty(node->value.slot);
        return;
      }
    }
  }

  // --- calls

  Time clamp(Time now) {
    latest = std::max(latest, now);
    return latest;
  }

  void run(Time now) {
    while (!timers.empty() && timers.front().time <= now) {
      std::pop_heap(timers.begin(), timers.end(), later);
      const Timer t = timers.back();
      timers.pop_back();
      fire(t, now);
    }
    flush_dirty(now);
  }

  // Ends every mutating call: drops stale timers off the top (so next_wakeup() is exact)
  // and lets go of everything once no key is left.
  void finish() {
    while (!timers.empty() && !live(timers.front())) {
      std::pop_heap(timers.begin(), timers.end(), later);
      timers.pop_back();
    }
    if (keys.empty()) {
      timers.clear();
      slots.clear();
      free_slots.clear();
      if (timers.capacity() > 1024) timers.shrink_to_fit();
      if (slots.capacity() > 1024) slots.shrink_to_fit();
      if (free_slots.capacity() > 1024) free_slots.shrink_to_fit();
    }
  }

  AcquireResult acquire(const Request& r, Time now) {
    Node* node = find_node(r.key);
    if (!matches(node, r)) return AcquireResult{AcquireStatus::mismatch, 0, Grant{}};
    const Mode mode = mode_of(r);
    bool grant_now = true;
    if (node != nullptr) {
      const KeyState& k = node->value;
      bool queue_empty = k.entries.size() == k.holders;
      grant_now =
          delayed_until(k) <= now && compatible(k, mode, r.permits) && (!r.fair || queue_empty);
    }
    AcquireResult result{AcquireStatus::busy, 0, Grant{}};
    if (!grant_now && r.deadline <= now) return result;

    const std::uint64_t token = grant_now ? tokens->next() : 0;
    if (node == nullptr) node = &create_for(r);
    KeyState& k = node->value;
    const Entry e{++last_id, r.session, 0, r.deadline, r.ttl, r.lock_delay, mode, r.permits};
    result.id = e.id;
    if (!r.value.empty()) values.emplace(e.id, r.value);
    if (grant_now) {
      // Before the waiters: a non-fair grant may pass a queue.
      auto at = k.entries.insert(k.entries.begin() + k.holders, e);
      make_holder(k, *at, token, now);
      result.status = AcquireStatus::granted;
      result.grant = grant_of(*node, *at);
    } else {
      k.entries.push_back(e);
      waiting.emplace(e.id, k.slot);
      if (e.time != Time::max()) push_timer({e.time, e.id, 0, TimerKind::deadline});
      result.status = AcquireStatus::queued;
    }
    return result;
  }

  bool cancel(RequestId id, Time now) {
    auto it = waiting.find(id);
    if (it == waiting.end()) return false;
    if (!sets.empty() && sets.contains(id)) {
      remove_set(id);
      flush_dirty(now);
      return true;
    }
    Node* node = slots[it->second];
    KeyState& k = node->value;
    remove_waiter(k, find_waiter(k, id));
    mark_dirty(k.slot);
    flush_dirty(now);
    return true;
  }

  std::size_t cancel_session(std::uint64_t session, Time now) {
    // Sets first, each out of all its queues at once (in id order, for determinism).
    std::vector<RequestId> session_sets;
    for (const auto& [id, members] : sets) {
      const KeyState& k = slots[members.front()]->value;
      if (k.entries[find_waiter(k, id)].session == session) session_sets.push_back(id);
    }
    std::sort(session_sets.begin(), session_sets.end());
    for (RequestId id : session_sets) remove_set(id);
    std::size_t cancelled = session_sets.size();

    std::vector<std::uint32_t> touched;
    for (const auto& [id, slot] : waiting) touched.push_back(slot);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());

    // Keys are then served in the order of their first cancelled request, so the grants
    // (and the tokens they draw) do not depend on hash order.
    std::vector<std::pair<RequestId, std::uint32_t>> order;
    for (std::uint32_t slot : touched) {
      KeyState& k = slots[slot]->value;
      RequestId first = 0;
      auto waiters = k.entries.begin() + k.holders;
      auto gone = std::remove_if(waiters, k.entries.end(), [&](const Entry& e) {
        if (e.session != session) return false;
        if (first == 0 || e.id < first) first = e.id;
        waiting.erase(e.id);
        forget_value(e.id);
        ++cancelled;
        return true;
      });
      if (gone == k.entries.end()) continue;
      k.entries.erase(gone, k.entries.end());
      order.emplace_back(first, slot);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [first, slot] : order) mark_dirty(slot);
    flush_dirty(now);
    return cancelled;
  }

  std::optional<Time> renew(std::string_view key, std::uint64_t token, milliseconds ttl, Time now) {
    Node* node = find_node(key);
    if (node == nullptr) return std::nullopt;
    KeyState& k = node->value;
    std::size_t i = find_holder(k, token);
    if (i == k.entries.size()) return std::nullopt;
    Entry& e = k.entries[i];
    note_changed(k.slot);
    e.ttl = ttl;  // the lease length a snapshot carries over a restart
    Time expires = add_saturating(now, ttl);
    if (expires != e.time) {
      e.time = expires;
      if (expires != Time::max()) push_timer({expires, token, k.slot, TimerKind::lease});
    }
    return expires;
  }

  std::optional<Grant> restore(const Request& r, std::uint64_t token, Time now) {
    if (token == 0 || token > tokens->last() || r.ttl <= milliseconds::zero()) {
      return std::nullopt;
    }
    Node* node = find_node(r.key);
    if (!matches(node, r)) return std::nullopt;
    const Mode mode = mode_of(r);
    if (node != nullptr) {
      const KeyState& k = node->value;
      if (!compatible(k, mode, r.permits) || find_holder(k, token) != k.entries.size()) {
        return std::nullopt;
      }
    } else {
      node = &create_for(r);
    }
    KeyState& k = node->value;
    const Entry e{++last_id, r.session, 0, Time{}, r.ttl, r.lock_delay, mode, r.permits};
    if (!r.value.empty()) values.emplace(e.id, r.value);
    auto at = k.entries.insert(k.entries.begin() + k.holders, e);
    make_holder(k, *at, token, now);
    return grant_of(*node, *at);
  }

  bool restore_delay(std::string_view key, Time until, Time now) {
    if (until <= now) return false;
    Node* node = find_node(key);
    if (node == nullptr) node = &create(key);
    KeyState& k = node->value;
    if (until <= delayed_until(k)) return true;
    note_changed(k.slot);
    delays[k.slot] = until;
    // token 0: no grant caused it; a delay timer is matched by key slot and time alone.
    if (until != Time::max()) push_timer({until, 0, k.slot, TimerKind::delay});
    return true;
  }

  bool set_value(std::string_view key, std::uint64_t token, std::string value) {
    Node* node = find_node(key);
    if (node == nullptr) return false;
    const KeyState& k = node->value;
    const std::size_t i = find_holder(k, token);
    if (i == k.entries.size()) return false;
    note_changed(k.slot);
    if (value.empty()) {
      forget_value(k.entries[i].id);
    } else {
      values.insert_or_assign(k.entries[i].id, std::move(value));
    }
    return true;
  }

  bool release(std::string_view key, std::uint64_t token, Time now) {
    Node* node = find_node(key);
    if (node == nullptr) return false;
    KeyState& k = node->value;
    std::size_t i = find_holder(k, token);
    if (i == k.entries.size()) return false;
    remove_holder(k, i);  // a release never starts a lock-delay
    mark_dirty(k.slot);
    flush_dirty(now);
    return true;
  }
};

LockTable::LockTable(TokenSource* tokens) : impl_(std::make_unique<Impl>(tokens)) {}
LockTable::~LockTable() = default;

AcquireResult LockTable::acquire(const Request& request, Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  AcquireResult result = impl_->acquire(request, now);
  impl_->finish();
  return result;
}

SetAcquireResult LockTable::acquire_set(const SetRequest& request, Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  SetAcquireResult result = impl_->acquire_set(request, now);
  impl_->finish();
  return result;
}

bool LockTable::cancel(RequestId id, Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  bool cancelled = impl_->cancel(id, now);
  impl_->finish();
  return cancelled;
}

std::size_t LockTable::cancel_session(std::uint64_t session, Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  std::size_t cancelled = impl_->cancel_session(session, now);
  impl_->finish();
  return cancelled;
}

std::optional<Time> LockTable::renew(std::string_view key, std::uint64_t token, milliseconds ttl,
                                     Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  std::optional<Time> expires = impl_->renew(key, token, ttl, now);
  impl_->finish();
  return expires;
}

bool LockTable::release(std::string_view key, std::uint64_t token, Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  bool released = impl_->release(key, token, now);
  impl_->finish();
  return released;
}

void LockTable::advance(Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  impl_->finish();
}

std::optional<Grant> LockTable::restore(const Request& request, std::uint64_t token, Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  std::optional<Grant> grant = impl_->restore(request, token, now);
  impl_->finish();
  return grant;
}

bool LockTable::restore_delay(std::string_view key, Time until, Time now) {
  now = impl_->clamp(now);
  impl_->run(now);
  const bool delayed = impl_->restore_delay(key, until, now);
  impl_->finish();
  return delayed;
}

bool LockTable::set_value(std::string_view key, std::uint64_t token, std::string value) {
  return impl_->set_value(key, token, std::move(value));
}

bool LockTable::holds(std::string_view key, std::uint64_t token) const {
  return find(key, token).has_value();
}

std::optional<Grant> LockTable::find(std::string_view key, std::uint64_t token) const {
  const Impl::Node* node = impl_->find_node(key);
  if (node == nullptr) return std::nullopt;
  const Impl::KeyState& k = node->value;
  std::size_t i = impl_->find_holder(k, token);
  if (i == k.entries.size()) return std::nullopt;
  return Impl::grant_of(*node, k.entries[i]);
}

KeyInfo LockTable::inspect(std::string_view key) const {
  KeyInfo info;
  const Impl::Node* node = impl_->find_node(key);
  if (node == nullptr) return info;
  const Impl::KeyState& k = node->value;
  info.holders.reserve(k.holders);
  info.waiters.reserve(k.entries.size() - k.holders);
  for (std::size_t i = 0; i < k.entries.size(); ++i) {
    const Impl::Entry& e = k.entries[i];
    if (i < k.holders) {
      info.holders.push_back(
          HolderInfo{e.id, e.mode, e.token, e.time, e.session, e.ttl, e.lock_delay, e.permits});
      if (auto v = impl_->values.find(e.id); v != impl_->values.end()) {
        info.holders.back().value = v->second;
      }
    } else {
      info.waiters.push_back(WaiterInfo{e.id, e.mode, e.time, e.session, e.permits});
    }
  }
  if (const Time end = impl_->delayed_until(k); end != kNoDelay) info.delayed_until = end;
  if (const Impl::Semaphore* sem = impl_->semaphore_of(k)) info.capacity = sem->capacity;
  return info;
}

std::vector<KeySummary> LockTable::list(std::string_view prefix, std::string_view after,
                                        std::size_t limit) const {
  std::vector<KeySummary> page;
  if (limit == 0) return page;
  const auto by_key = [](const KeySummary& a, const KeySummary& b) { return a.key < b.key; };
  // A max-heap of the `limit` smallest matching keys seen so far.
  impl_->keys.for_each([&](const Impl::Node& node) {
    const std::string_view key = node.key();
    const Impl::KeyState& state = node.value;
    if (!key.starts_with(prefix) || key <= after) return;
    if (page.size() == limit && !(key < page.front().key)) return;
    page.push_back(
        KeySummary{std::string(key), state.holders, state.entries.size() - state.holders});
    std::push_heap(page.begin(), page.end(), by_key);
    if (page.size() > limit) {
      std::pop_heap(page.begin(), page.end(), by_key);
      page.pop_back();
    }
  });
  std::sort_heap(page.begin(), page.end(), by_key);
  return page;
}

TableStats LockTable::stats() const {
  return TableStats{impl_->keys.size(), impl_->holder_count, impl_->waiting.size()};
}

bool LockTable::empty() const { return impl_->keys.empty(); }

std::optional<Time> LockTable::next_wakeup() const {
  if (impl_->timers.empty()) return std::nullopt;
  return impl_->timers.front().time;
}

std::vector<Event> LockTable::take_events() { return std::exchange(impl_->events, {}); }

void LockTable::record_changes(bool on) {
  impl_->recording = on;
  if (!on) impl_->changed.clear();
}

std::vector<std::string> LockTable::take_changed_keys() {
  return std::exchange(impl_->changed, {});
}

}  // namespace warden::table
