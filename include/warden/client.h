// warden/client.h — the entry point: a connection to one lock backend.
//
//   auto client = warden::Client::open("mem://");               // or redis://, etcd://, ...
//   warden::Lock lock = client.lock("billing", "invoice-7");
//   if (auto lease = lock.acquire(warden::Mode::exclusive, warden::Wait::up_to(2s))) {
//     storage.write(data, lease.token());                        // fenced write
//   }
//
// URIs (see docs/engines): mem://[NAME] — the in-process lock table; every Client that
// opens the same NAME in one process shares one table ("mem://" is NAME "default").
//
// A Client is a cheap, copyable handle; copies share one engine connection, one
// watchdog, one reentrancy table and one metrics registry. It is thread-safe. The
// watchdog thread stops when the last handle, Lock and Lease of the client is gone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "warden/lock.h"
#include "warden/multi_lock.h"
#include "warden/options.h"
#include "warden/election.h"
#include "warden/semaphore.h"
#include "warden/sequencer.h"
#include "warden/status.h"
#include "warden/types.h"

namespace warden {

class Client {
 public:
  // Opens an engine by URI. Throws Error(invalid_argument) for a malformed URI, an
  // unknown scheme or invalid options; unavailable / permission_denied if the
  // backend cannot be reached or refuses us.
  static Client open(std::string_view uri, ClientOptions options = {});

  // The lock (group, name) with the client's default options, or with `options`.
  // group: [A-Za-z0-9._-]{1,64}; name: 1..512 bytes, no NUL. Throws
  // Error(invalid_argument) for anything else, or for invalid options, before any I/O;
  // Error(unsupported) for options the engine cannot honour.
  Lock lock(std::string_view group, std::string_view name) const;
  Lock lock(std::string_view group, std::string_view name, LockOptions options) const;
  Locks locks(std::string_view group) const;
  Locks locks(std::string_view group, LockOptions options) const;

  // The semaphore (group, name) of `permits` permits (warden/semaphore.h), with the
  // client's default options or `options`. Throws Error(invalid_argument) for a bad
  // group, name, options or number of permits (1..1,000,000), before any I/O;
  // Error(unsupported) if the engine has no semaphores.
  Semaphore semaphore(std::string_view group, std::string_view name, std::uint32_t permits) const;
  Semaphore semaphore(std::string_view group, std::string_view name, std::uint32_t permits,
                      LockOptions options) const;

  // The election (group, name) (warden/election.h), with the client's default options
  // or `options` for its campaigns' leases. Throws Error(invalid_argument) for a bad
  // group, name or options, before any I/O; Error(unsupported) if the engine has no
  // elections, or for options it cannot honour.
  Election election(std::string_view group, std::string_view name) const;
  Election election(std::string_view group, std::string_view name, LockOptions options) const;

  // The multi-lock over `members` (warden/multi_lock.h), with the client's default
  // options or `options` for every member. Throws Error(invalid_argument) for no
  // members, more than 1024, a bad group or name, the same lock named twice, or invalid
  // options; Error(unsupported) for a mode or option the engine lacks; all before any
  // I/O. Every engine has multi-locks.
  MultiLock multi(std::vector<LockSpec> members) const;
  MultiLock multi(std::vector<LockSpec> members, LockOptions options) const;

  // Chubby's CheckSequencer: true iff the grant the sequencer names is still held on
  // the backend. Throws Error(invalid_argument) for a malformed sequencer,
  // unsupported if the engine cannot check, unavailable if it cannot be asked.
  bool check(const Sequencer& sequencer) const;
  bool check(std::string_view sequencer) const;

  // The lock (group, name) as the backend sees it now: its holders (mode, token, time
  // left on the lease) and its waiters in queue order (warden/status.h says what each
  // engine knows). One read of the backend, bounded by ClientOptions::op_timeout; never
  // waits for the lock and changes nothing. A lock nobody holds or waits for has empty
  // lists. Throws Error(invalid_argument) for a bad group or name, before any I/O;
  // unsupported if the engine cannot be asked; unavailable / deadline_exceeded if the
  // backend does not answer; permission_denied if it refuses us.
  LockStatus inspect(std::string_view group, std::string_view name) const;

  // Every lock of `group` the backend knows now (held, waited for, or in a lock-delay),
  // sorted by name, with holder and waiter counts. Pages through the backend's key
  // space (a SCAN, a range, a children list, or wardend's LIST), one round trip per page
  // of at most 1000 locks, so it blocks longer for large groups; locks that come or go
  // meanwhile may or may not be listed. Throws like inspect.
  std::vector<LockSummary> list(std::string_view group) const;

  Capabilities capabilities() const;
  const std::string& uri() const;

  // The client's metrics in the Prometheus text exposition format (version 0.0.4):
  // per group, counters of acquire attempts / grants / timeouts / errors / releases /
  // losses / renewals, and histograms of wait and hold time in seconds.
  std::string metrics_text() const;

 private:
  explicit Client(std::shared_ptr<detail::ClientState> state);
  std::shared_ptr<detail::ClientState> state_;
};

}  // namespace warden
