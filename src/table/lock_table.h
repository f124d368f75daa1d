// table/lock_table.h — warden's lock state machine.
//
// LockTable is pure: single-threaded, no I/O, no clock. Every call that can change
// state takes `now`; whatever the change caused for *other* requests (a waiter granted,
// a lease expired, a wait timed out) is queued as an Event and handed back by
// take_events(). The mem:// engine and wardend are shells around it; the conformance
// suite is checked against it.
//
// Rules (docs/contract.md has them as a state table):
//   - exclusive grants exclude everything; shared grants exclude only exclusive ones;
//   - fair requests queue FIFO behind any waiter; when the head can be granted, so is
//     the run of shared waiters right behind a shared head; a shared request queues
//     behind a waiting exclusive one (no writer starvation);
//   - non-fair requests are granted at once when compatible with the current holders
//     (and no lock-delay is running), whatever is queued;
//   - each grant has its own lease (expires = grant time + ttl), renewable by token;
//   - a lease that expires (rather than being released) blocks the key for that
//     grant's lock_delay;
//   - every grant draws a token from one TokenSource shared by all keys, so tokens of
//     one key strictly increase (shared grants included);
//   - waiters have deadlines and can be cancelled; a key with no holders, waiters or
//     running lock-delay is forgotten (nothing leaks);
//   - a semaphore is a key of `capacity` permits: each request asks for `permits` of
//     them and is granted while the permits held plus its own fit, under the same FIFO,
//     fairness, lease, lock-delay and token rules (a request for many waits its turn;
//     smaller ones behind it do not pass it). While the key exists, every request on it
//     must name the same capacity; a lock request on a semaphore, or a semaphore
//     request on a lock, is refused (AcquireStatus::mismatch) and changes nothing;
//   - a request may carry a value (an election's candidate); the value stays with the
//     request while it waits and with its grant while held, and goes with it. Values are
//     kept beside the entries, so requests without one pay nothing for them;
//   - a set request (a multi-lock) asks for several keys at once and is granted all of
//     them in one step, or none: it queues in every member key's queue under one id,
//     holds nothing while it waits, and is granted when it heads every one of those
//     queues with every member compatible. Queues stay FIFO and sets enter all their
//     queues in one step, so every queue orders its requests by arrival: the oldest
//     waiter heads all its queues, and sets cannot deadlock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "warden/types.h"

namespace warden::table {

using Time = Clock::time_point;
using std::chrono::milliseconds;

// Identifies one request: a waiter while it waits, the same id once granted.
using RequestId = std::uint64_t;

// Where tokens come from. The default counts up in memory from 1; wardend's persists
// reservations so that tokens never go backwards across a crash.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // A token larger than every token returned before.
  virtual std::uint64_t next() = 0;
  // The last token returned (0 before the first).
  virtual std::uint64_t last() const = 0;
};

class CountingTokenSource final : public TokenSource {
 public:
  explicit CountingTokenSource(std::uint64_t last = 0) : last_(last) {}
  std::uint64_t next() override { return ++last_; }
  std::uint64_t last() const override { return last_; }

 private:
  std::uint64_t last_;
};

struct Request {
  std::string key;  // opaque; the core uses "group/name"
  Mode mode = Mode::exclusive;
  milliseconds ttl{30'000};    // lease length, > 0
  milliseconds lock_delay{0};  // applied if this grant's lease expires
  bool fair = true;
  Time deadline = Time::max();  // wait limit; <= now: try once, never queue
  std::uint64_t session = 0;    // caller's tag (e.g. a connection); echoed in events
  // A semaphore request when capacity > 0: `permits` (1..capacity) of the key's
  // `capacity`; `mode` is then ignored and grants say Mode::shared. 0: a lock request.
  std::uint32_t capacity = 0;
  std::uint32_t permits = 0;
  // An election's campaign: the candidate's value, kept with the request while it waits
  // and with its grant while held (inspect, set_value). Empty for a lock's request.
  std::string value{};
};

// A multi-lock's request: every member key in its mode, granted together or not at all.
// Keys must be distinct locks (no semaphores); the rest means what it means in Request.
struct SetRequest {
  struct Member {
    std::string key;
    Mode mode = Mode::exclusive;
  };
  std::vector<Member> members;
  milliseconds ttl{30'000};
  milliseconds lock_delay{0};
  bool fair = true;
  Time deadline = Time::max();
  std::uint64_t session = 0;
};

struct Grant {
  RequestId id = 0;
  std::string key;
  Mode mode = Mode::exclusive;
  std::uint64_t token = 0;
  Time expires;
  std::uint64_t session = 0;
  milliseconds lock_delay{0};  // applied if this lease expires
  std::uint32_t permits = 0;   // a semaphore's grant: the permits it holds; else 0
};

struct Event {
  enum class Kind {
    granted,      // a queued request was granted: `grant` is filled in
    timed_out,    // a queued request's deadline passed; it is gone
    expired,      // a held lease expired (not released): `grant` is the old grant
    set_granted,  // a queued set request was granted: `grants`, in member order
  };
  Kind kind;
  // For timed_out: id, key, mode and session only. For a set (set_granted, or a set's
  // timed_out): the set request's id with its first member's key, mode and session.
  Grant grant;
  // set_granted only: the members' grants, each with an id of its own (not the set's).
  std::vector<Grant> grants{};
};

enum class AcquireStatus {
  granted,   // result.grant holds the grant
  queued,    // waiting as result.id; a later `granted` or `timed_out` event follows,
             // unless cancel(result.id) removes it first
  busy,      // not grantable now and the request may not wait (deadline <= now)
  mismatch,  // the key is a semaphore of another capacity, or a lock asked as a
             // semaphore (or the reverse), or permits are not within 1..capacity;
             // nothing changed
};

struct AcquireResult {
  AcquireStatus status;
  RequestId id = 0;
  Grant grant;  // when status == granted
};

struct SetAcquireResult {
  AcquireStatus status;  // mismatch: no members, a key twice, or a semaphore's key
  RequestId id = 0;      // the set request's (while queued: its waiter id in every queue)
  std::vector<Grant> grants;  // when status == granted, in member order, each its own id
};

struct HolderInfo {
  RequestId id;
  Mode mode;
  std::uint64_t token;
  Time expires;
  std::uint64_t session;
  milliseconds ttl{0};         // the lease length last granted or renewed
  milliseconds lock_delay{0};  // applied if this lease expires
  std::uint32_t permits = 0;   // of a semaphore; else 0
  std::string value{};         // an election's leader: its value; else empty
};

struct WaiterInfo {
  RequestId id;
  Mode mode;
  Time deadline;
  std::uint64_t session;
  std::uint32_t permits = 0;  // of a semaphore; else 0
};

struct KeyInfo {
  std::vector<HolderInfo> holders;    // in grant order
  std::vector<WaiterInfo> waiters;    // in queue order
  std::optional<Time> delayed_until;  // a running lock-delay
  std::uint32_t capacity = 0;         // a semaphore's permits; 0 for a lock
};

// One key in LockTable::list.
struct KeySummary {
  std::string key;
  std::size_t holders = 0;
  std::size_t waiters = 0;
};

struct TableStats {
  std::size_t keys = 0;
  std::size_t holders = 0;
  std::size_t waiters = 0;
};

class LockTable {
 public:
  // `tokens` must outlive the table; nullptr = an internal CountingTokenSource.
  explicit LockTable(TokenSource* tokens = nullptr);
  ~LockTable();
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  // Every mutating call first applies advance(now). `now` must not go backwards
  // across calls (a smaller `now` is treated as the largest seen so far).

  AcquireResult acquire(const Request& request, Time now);
  // A set request: granted at once (every member) when each member key could grant its
  // member now under Request's rules; else queued as one request (a later set_granted
  // or timed_out event) or busy. cancel(id) withdraws it from every queue.
  SetAcquireResult acquire_set(const SetRequest& request, Time now);
  // Removes a queued request. true if it was waiting (it leaves no trace; the queue
  // behind it may be granted); false if it is unknown — already granted, timed out or
  // cancelled (look at the events).
  bool cancel(RequestId id, Time now);
  // Cancels every queued request tagged `session`; returns how many.
  std::size_t cancel_session(std::uint64_t session, Time now);
  // Extends the lease of the grant (key, token) to now + ttl. nullopt if that grant is
  // not held (released, expired, never existed).
  std::optional<Time> renew(std::string_view key, std::uint64_t token, milliseconds ttl, Time now);
  // Replaces the value the grant (key, token) carries (an election's proclaim). false,
  // and nothing changes, if that grant is not held.
  bool set_value(std::string_view key, std::uint64_t token, std::string value);
  // Releases the grant (key, token). false if it was not held.
  bool release(std::string_view key, std::uint64_t token, Time now);
  // Expires leases, times out waiters, ends lock-delays and grants whatever became
  // grantable, up to `now`.
  void advance(Time now);

  // Restoring a table carried over a restart (wardend's clean shutdown): the grants keep
  // the tokens an earlier run drew, and get a full lease from `now`.
  //
  // Inserts a held grant of request.key / mode / ttl / lock_delay / session with `token`;
  // its lease ends at now + request.ttl (deadline and fairness are ignored). nullopt, and
  // nothing changes, when the grant could not have been held beside the key's holders
  // (exclusive beside anything, shared beside exclusive, permits beyond a semaphore's
  // capacity, a semaphore's grant on a lock or the reverse), its token is held on the key
  // already, is 0 or above the TokenSource's last() (later grants must draw larger
  // tokens), or ttl <= 0. Call before the key has waiters (they would be passed).
  std::optional<Grant> restore(const Request& request, std::uint64_t token, Time now);
  // Blocks `key` by a lock-delay until `until`, as if a lease had expired; a running one
  // that ends later is kept. false (nothing changes) for `until` <= now.
  bool restore_delay(std::string_view key, Time until, Time now);

  // Read-only queries (they do not advance time; call advance first for fresh answers).
  bool holds(std::string_view key, std::uint64_t token) const;
  std::optional<Grant> find(std::string_view key, std::uint64_t token) const;
  KeyInfo inspect(std::string_view key) const;
  // The keys that start with `prefix` and sort (bytewise) after `after`, in order, at
  // most `limit` of them: one page of a listing whose next page starts after the last
  // key returned. A key is listed while it has holders, waiters or a running lock-delay.
  // Looks at every key (the table keeps no order), so it costs O(keys) per page.
  std::vector<KeySummary> list(std::string_view prefix, std::string_view after,
                               std::size_t limit) const;
  TableStats stats() const;
  bool empty() const;
  // The earliest time at which advance() would change something, if any.
  std::optional<Time> next_wakeup() const;

  // Events caused since the last call, in the order they happened.
  std::vector<Event> take_events();

  // Change recording, for a replica of the held grants (a wardend cell's leader sends
  // every member the holders of each key it changed). While on, every key whose holders,
  // their leases (a renew), values or running lock-delay changed is noted; waiters
  // alone are not. Off by default: a table that does not record pays one branch.
  void record_changes(bool on);
  // The keys changed since the last call, in the order of their changes, repeats
  // included; a key may since have been forgotten (nothing held, no lock-delay).
  std::vector<std::string> take_changed_keys();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace warden::table
