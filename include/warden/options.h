// warden/options.h — option structs. Plain data with documented defaults.
#pragma once

#include <chrono>
#include <cstddef>

#include "warden/types.h"

namespace warden {

using std::chrono::milliseconds;

// How a client spaces repeated attempts where an engine polls (e.g. Redis waiters
// between pub/sub wake-ups) and how it backs off after transient errors.
struct RetryPolicy {
  enum class Kind { constant, exponential };
  Kind kind = Kind::exponential;
  milliseconds initial{10};  // first delay
  milliseconds max{500};     // exponential growth stops here
  double multiplier = 2.0;   // exponential growth factor (>= 1)
  double jitter = 0.2;       // each delay is scaled by a random factor in [1-j, 1+j]; 0..1
};

// Per-lock options. A Lock takes them from Client::lock(); unspecified locks use
// ClientOptions::lock_defaults.
struct LockOptions {
  // Lease length of every grant. The backend frees the lock this long after the last
  // successful renewal. Valid range: 10 ms .. 7 days.
  milliseconds ttl{30'000};
  // The order waiting requests are granted in (see Fairness). automatic: FIFO where the
  // engine has it, the engine's own order otherwise, so the default works everywhere;
  // ask for fifo explicitly where a FIFO guarantee matters.
  Fairness fairness = Fairness::automatic;
  // Chubby's lock-delay: after a lease *expires* (rather than being released), nobody is
  // granted the lock for this long. 0 = off. Valid range: 0 .. 1 hour.
  milliseconds lock_delay{0};
  // Lock caching (docs/contract.md, "Lock caching"): a lock released by this client stays
  // granted on the backend and is kept by the client, so that its next acquire of the lock
  // needs no I/O, until another client asks for it (the backend tells the client, which
  // gives the lock back as soon as no thread of its own holds it), it stays unused for
  // ClientOptions::cache_idle, or the Client closes. A re-acquire from the cache returns
  // the same fencing token. Only where Capabilities::cache says so (else unsupported), and
  // only for locks (Client::lock, Client::locks): semaphores, elections and multi-locks
  // refuse it.
  bool cache = false;
};

struct ClientOptions {
  LockOptions lock_defaults;
  // The watchdog renews every held lease this often. 0 = ttl/3 of each lease.
  // Must be below the TTL of every lease it renews.
  milliseconds renew_interval{0};
  // false: leases are never renewed; each grant is held for at most its TTL, and its
  // lost signal fires when the TTL runs out on the client's clock.
  bool watchdog = true;
  // Limit for one backend call (a renewal, a release, one step of an acquire).
  milliseconds op_timeout{5'000};
  // Polling and back-off (see RetryPolicy).
  RetryPolicy retry;
  // Lock caching (LockOptions::cache): a cached lock unused for this long is given back;
  // at most cache_capacity locks are kept (the longest unused goes first). Both > 0.
  milliseconds cache_idle{10'000};
  std::size_t cache_capacity = 1024;
};

}  // namespace warden
