// conformance/backend.h — what the conformance suite needs from an engine under test.
//
// Each engine's test target provides one or more EngineCase values: a name, the
// capabilities the engine must report, and a function that starts a throwaway backend
// (a real server on 127.0.0.1 with a temp dir and a free port, or the in-process table)
// and returns a Backend for it. The backend is stopped when the Backend is destroyed.
//
// What a Backend can do is decided by its type, never by a failure: a probe that cannot
// reach its backend throws, and the test that asked fails. Only "this kind of backend
// has no such thing" (a false or nullopt that every call of the type returns) lets a
// test skip.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "warden/types.h"

namespace warden::conformance {

class Backend {
 public:
  virtual ~Backend() = default;
  // A URI that Client::open accepts for this backend. Every call may return the same
  // URI; clients opened from it share the backend's lock state.
  virtual std::string uri() const = 0;
  // Makes the backend forget every grant of (group, name) as if its leases had ended,
  // without telling the clients. false if this kind of backend cannot do that (the
  // tests that need it are then skipped); throws std::runtime_error if it could not be
  // done this time.
  virtual bool drop_grants(std::string_view group, std::string_view name) = 0;
  // How many requests wait in the backend's own queue for (group, name), read behind
  // the clients' back: requests the backend knows of that do not hold the lock. nullopt
  // if this kind of backend keeps no queue the test can read; throws std::runtime_error
  // if the queue could not be read this time.
  virtual std::optional<std::size_t> queued(std::string_view group, std::string_view name) = 0;
  // Freezes every process of the backend (SIGSTOP), as a long GC pause, a VM migration
  // or a dead disk would: connections stay open and nothing answers. false if this kind
  // of backend has no process to freeze (mem://). Only a clause that started a backend
  // of its own (EngineCase::start) may freeze it.
  virtual bool freeze() { return false; }
  // Lets every process run again (SIGCONT).
  virtual void thaw() {}
  // How many servers a call that finds none answering asks in turn, each for the whole
  // op_timeout, before it fails: release() and check() on a frozen backend take up to
  // this many op_timeouts (etcd://'s failover, docs/engines/etcd.md); 1 elsewhere.
  virtual int servers_asked_in_turn() const { return 1; }
  // Whether a client connects only to the host:ports written in uri(), so that a relay in
  // front of each sees every connection it makes (the silent-partition clause). false
  // where the backend tells clients where to connect (Redis Sentinel and Cluster name
  // the master and the nodes) or there is no network (mem://).
  virtual bool reached_only_at_its_uri() const { return false; }
};

struct EngineCase {
  std::string name;  // a GoogleTest-safe identifier: [A-Za-z0-9_]
  // What the engine must report (Client::capabilities()). Pinned here, so a capability
  // the engine stops reporting fails Conformance.ReportsItsPinnedCapabilities and every
  // clause that needs it, instead of turning those clauses into skips.
  Capabilities capabilities;
  std::function<std::unique_ptr<Backend>()> start;
  // Every lock the suite's clients take is cached (LockOptions::cache, through
  // lock_options() and ClientOptions::lock_defaults): the contract holds with caching on.
  bool cache = false;
};

}  // namespace warden::conformance
