// warden/election.h — leader election: one leader at a time, with a term that fences it,
// a value that says who (or where) it is, and a way for anyone to see who leads.
//
//   warden::Election election = client.election("billing", "invoicer");
//   warden::Leadership leading = election.campaign("node-a:8080");   // waits to lead
//   run_as_leader(leading.term(), leading.lost_token());
//   leading.resign();
//
//   if (auto leader = election.leader()) connect(leader->value);
//
// A campaign is an exclusive lock on (group, name) whose grant carries the candidate's
// value. Candidates queue as a fair lock's waiters do; the one granted leads, with its
// fencing token as its term: terms increase from leader to leader, so a resource that
// admits only the highest term it has seen (warden/fence_gate.h) never takes an old
// leader's write after a new one's. The lease is renewed by the watchdog and lost like a
// lock's; a lost leadership fires lost_token() and the next candidate leads.
//
// docs/primitives.md has the state table; Capabilities::election says which engines
// have elections (the others refuse with Error(unsupported)).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "warden/async.h"
#include "warden/lease.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden {

namespace detail {
class ClientState;
class Hold;
}  // namespace detail

// Values are any bytes, at most this many.
inline constexpr std::size_t kMaxLeaderValueBytes = 4096;

// Who leads: the value it proclaimed last and its term.
struct Leader {
  std::string value;
  std::uint64_t term = 0;
  friend bool operator==(const Leader&, const Leader&) = default;
};

// The leadership won by a campaign: a Lease whose token is the term.
class Leadership {
 public:
  Leadership() noexcept = default;  // empty: leads nothing
  Leadership(Leadership&&) noexcept = default;
  Leadership& operator=(Leadership&&) noexcept = default;  // resigns what *this held first

  bool valid() const noexcept { return lease_.valid(); }
  explicit operator bool() const noexcept { return valid(); }

  // Precondition for the accessors below: valid().
  std::uint64_t term() const { return lease_.token(); }
  const std::string& value() const;  // as last proclaimed by this handle
  const Lease& lease() const noexcept { return lease_; }
  bool lost() const { return lease_.lost(); }
  std::stop_token lost_token() const { return lease_.lost_token(); }

  // Replaces the leader's value on the backend; observers see the same term with the
  // new value. Throws Error: invalid_argument (value too long), lost (no longer the
  // leader: the lease was lost or resigned), unavailable / deadline_exceeded.
  void proclaim(std::string value);

  // Gives up leadership: releases the grant (Lease::release, same errors); the next
  // candidate leads. Afterwards the Leadership is empty. Idempotent.
  void resign() { lease_.release(); }

 private:
  friend class Election;
  Leadership(Lease lease, std::shared_ptr<detail::Hold> hold, std::string value) noexcept;
  Lease lease_;
  std::shared_ptr<detail::Hold> hold_;
  std::string value_;
};

class Election {
 public:
  const std::string& group() const noexcept { return group_; }
  const std::string& name() const noexcept { return name_; }

  // Waits, as `wait` says and until `stop` is requested, to become the leader with
  // `value`. Returns an empty Leadership if the wait ran out or was cancelled (that
  // campaign leaves no trace). Each campaign is a grant of its own: a process that
  // campaigns twice is two candidates. Throws Error: invalid_argument (value too long,
  // or (group, name) is a semaphore), unsupported, unavailable / deadline_exceeded,
  // permission_denied.
  [[nodiscard]] Leadership campaign(std::string value, Wait wait = Wait::forever(),
                                    std::stop_token stop = {});

  // The same campaign without blocking (warden/async.h): `done` gets the Leadership (empty
  // when the wait ran out or was cancelled, leaving no trace) or the Error exactly once,
  // on the Client's completion thread or on `executor`. Bad input throws at once.
  using CampaignCallback = std::function<void(std::exception_ptr error, Leadership leadership)>;
  AcquireHandle campaign_async(std::string value, Wait wait, CampaignCallback done,
                               Executor executor = {});

  // The leader now, or nullopt when nobody leads. One read of the backend.
  std::optional<Leader> leader() const;

  // Calls `on_change` with the leader now (or nullopt), then again each time the
  // leader or its value changes, until `stop` is requested; then returns. Calls come in
  // term order (a term never goes backwards) from the calling thread; the last change
  // is never missed, while changes that undo each other between two looks may be
  // folded into one. Where the engine watches (Capabilities::watch: a push from
  // wardend, an etcd watch) the backend is looked at when it signals a change, and
  // every max(10 × poll, 1 s) besides; elsewhere it is looked at every `poll`. A look
  // that fails (backend down) is retried at the next poll; `on_change` is not called
  // for it.
  void observe(const std::function<void(const std::optional<Leader>&)>& on_change,
               std::stop_token stop, Clock::duration poll = std::chrono::milliseconds(100)) const;

 private:
  friend class Client;
  Election(std::shared_ptr<detail::ClientState> client, std::string group, std::string name,
           LockOptions options);

  std::shared_ptr<detail::ClientState> client_;
  std::string group_;
  std::string name_;
  LockOptions options_;
};

}  // namespace warden
