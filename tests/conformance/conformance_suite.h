// conformance/conformance_suite.h — the lock contract (DESIGN §2) as one parameterised
// GoogleTest suite, written once and instantiated for every engine.
//
// An engine's test executable links the `warden_conformance` object library and adds
//
//   INSTANTIATE_TEST_SUITE_P(Redis, Conformance,
//                            ::testing::Values(EngineCase{"Redis", start_redis}),
//                            name_printer);
//
// inside namespace warden::conformance. The cases of one process that run on one
// EngineCase share its Backend (started by the first of them, stopped after the last, or
// at once when a case on it fails); every case has a group name of its own, so cases
// never see each other's locks. No clause may change the backend for the cases after it
// (stop, pause or reconfigure it): that belongs in the engine's own tests.
//
// The tests assume nothing an engine need not give: hand-off may take a round trip,
// waits are bounded (kPatience), and a clause whose capability the engine lacks is
// skipped with WARDEN_SKIP_UNLESS. Which capabilities an engine has is pinned in its
// EngineCase, not taken from the engine: an engine that stops reporting one fails
// (Conformance.ReportsItsPinnedCapabilities, and every clause that needs it).
//
// A test that relies on the order of waiters first waits until the backend's own queue
// shows them (Backend::queued, read behind the clients' back), never for a fixed time:
// on a loaded machine a sleep can end before a waiter queued, or be needlessly long.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "conformance/backend.h"
#include "support/waiting.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/lease.h"
#include "warden/lock.h"
#include "warden/options.h"
#include "warden/types.h"

namespace warden::conformance {

using namespace std::chrono_literals;

// Upper bound for anything that should happen "soon" on any engine (a hand-off, a lost
// signal, a waiter giving up). Generous, so a slow engine in a sanitizer build passes;
// a test waits this long only when it is about to fail.
inline constexpr Clock::duration kPatience = 5s;
// A deadline given to a call that must return without waiting for it (a try on a busy
// lock, a request that can never succeed): the test checks the call came back before
// this, which no sanitizer build on a loaded machine comes near, while a call that
// waited out its deadline cannot pass.
inline constexpr Clock::duration kLongDeadline = 12 * kPatience;
// The one slack of the suite's safety bounds ("no grant before the TTL", "the loss is
// told before the re-grant"): tolerance between the client's steady clock and the
// backend's clock (Redis TIME, etcd and ZooKeeper session timers) over one bound. It
// only ever loosens a lower bound, so load cannot make such a bound fail.
inline constexpr Clock::duration kClockSlack = 25ms;

// Gives each parameterised test the engine's own name ("Conformance.Foo/Redis").
std::string name_printer(const ::testing::TestParamInfo<EngineCase>& info);
// Keeps GoogleTest from dumping the bytes of an EngineCase.
void PrintTo(const EngineCase& engine, std::ostream* os);

// A one-shot event that threads can wait for with a bound.
class Flag {
 public:
  void set();
  bool is_set() const;
  // true if the flag was set, at the latest when `timeout` has passed.
  bool wait_for(Clock::duration timeout) const;
  // When set() was first called; meaningful only once is_set().
  Clock::time_point set_at() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool set_ = false;          // guarded by mu_
  Clock::time_point set_at_;  // guarded by mu_
};

// Polls `pred` every `step` until it is true (returns true) or `timeout` passes (false).
bool eventually(const std::function<bool()>& pred, Clock::duration timeout = kPatience,
                Clock::duration step = 5ms);

// Success iff `f` throws warden::Error with code `want`.
template <class F>
::testing::AssertionResult throws_error(Errc want, F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    if (e.code() == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "threw Error(" << to_string(e.code()) << "), wanted Error(" << to_string(want)
           << "): " << e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-warden exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw; wanted Error(" << to_string(want) << ")";
}

// Success iff `f` returns within `bound`. `f` runs on a thread of its own (so it must
// not rely on the calling thread's holds); one that overruns is still waited for before
// this returns, and reported then. Exceptions from `f` propagate.
template <class F>
::testing::AssertionResult returns_before(Clock::duration bound, F&& f) {
  auto done = std::async(std::launch::async, std::forward<F>(f));
  if (done.wait_for(bound) == std::future_status::ready) {
    done.get();
    return ::testing::AssertionSuccess();
  }
  done.wait();
  return ::testing::AssertionFailure()
         << "the call did not return within "
         << std::chrono::duration_cast<std::chrono::milliseconds>(bound).count() << " ms";
}

// A thread that acquires `lock` in `mode` (waiting as `wait` says), then holds the
// lease until release() is called or the Holder is destroyed. The thread stays alive
// while it holds, so the hold is a genuine per-thread hold of that thread. Destroying
// the Holder cancels a wait still under way (through the thread's stop_token).
class Holder {
 public:
  Holder(Lock lock, Mode mode, Wait wait = Wait::forever());
  ~Holder();
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;

  // true once the lock was granted; waits at most `timeout`.
  bool wait_granted(Clock::duration timeout = kPatience) const;
  // true once acquire() returned (granted or not); waits at most `timeout`.
  bool wait_finished(Clock::duration timeout = kPatience) const;
  bool granted() const { return granted_.is_set(); }
  bool finished() const { return finished_.is_set(); }
  Clock::time_point granted_at() const { return granted_.set_at(); }
  std::uint64_t token() const;
  // Asks the thread to release and waits (bounded) until it did. true if it released
  // without an error.
  bool release();

 private:
  void run(std::stop_token stop, Lock lock, Mode mode, Wait wait);

  Flag granted_;
  Flag finished_;
  Flag released_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  bool release_requested_ = false;  // guarded by mu_
  std::uint64_t token_ = 0;         // guarded by mu_
  bool release_ok_ = false;         // guarded by mu_
  std::jthread thread_;             // last: starts after everything above exists
};

class Conformance : public ::testing::TestWithParam<EngineCase> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The backend this test runs against.
  Backend& backend() { return *backend_; }
  // A new Client on the backend. A client is a separate lock owner: its locks exclude
  // every other client's. Where the engine lacks FIFO fairness, the default lock options
  // ask for the fairness it has, so tests not about fairness run everywhere.
  //
  // Options a clause builds start from client_options(), not from the library's defaults:
  // op_timeout is how long a client waits for a backend before it counts it as gone, and
  // no clause but the ones that freeze or cut off a backend (which set their own) is about
  // that bound. A live backend beside two CPU hogs and the sanitizer run has taken more
  // than the library's 5 s to answer (an etcd txn, redlock releases), which a client
  // rightly reports as unavailable and which says nothing of the lock contract.
  static ClientOptions client_options() { return warden::testing::unhurried_options(); }
  Client open_client(ClientOptions options = client_options());
  // Lock options with the library's defaults, adjusted like open_client's.
  LockOptions lock_options() const;
  // A Client whose watchdog never renews: a holder that stopped renewing, as a process
  // that died or froze would. Its grants run out after their TTL and are then lost.
  Client open_client_without_renewals();
  // A new Client, as open_client() makes them, on another backend: one the test started
  // for itself (GetParam().start()) because it freezes or cuts it off.
  Client open_client_on(const Backend& backend, ClientOptions options = client_options()) const;
  // lock_options() with a lease of `ttl`.
  LockOptions lock_options_with_ttl(std::chrono::milliseconds ttl) const;
  // This test's group: unique per test (and per process), so no other test sees its
  // locks.
  const std::string& group() const { return group_; }
  // Whether this case caches every lock (EngineCase::cache): unlock() and a dropped Lease
  // then keep the grant, so the lock stays held on the backend until asked for.
  bool caching() const { return GetParam().cache; }
  // The engine's capabilities as its EngineCase pins them.
  const Capabilities& capabilities() const { return caps_; }
  // ...and as Client::capabilities() reports them.
  const Capabilities& reported_capabilities() const { return reported_; }

  // If the engine's pinned capabilities lack `cap`, marks the test skipped (with `what`
  // as the reason) and returns true; the caller must then return. If the engine reports
  // `cap` otherwise than pinned, fails the test and returns true. Use WARDEN_SKIP_UNLESS.
  bool skip_unless(bool Capabilities::*cap, std::string_view what);

  // If this kind of backend keeps no queue the suite can read (Backend::queued is
  // nullopt), marks the test skipped and returns true; the caller must then return. A
  // probe that fails fails the test (and returns true). Use WARDEN_SKIP_UNLESS_QUEUE.
  bool skip_unless_queue();
  // Success once the backend's queue of (group(), name) holds exactly `n` requests,
  // polled for at most kPatience; failure if it never does or the probe throws. On a
  // backend without a readable queue: success at once (the caller relies on no order).
  ::testing::AssertionResult queue_reaches(std::string_view name, std::size_t n);
  // The backend's queue of (group(), name) now; nullopt without a readable queue.
  // Throws std::runtime_error if the probe fails.
  std::optional<std::size_t> queued(std::string_view name);

  // Whether a client of its own could be granted (group(), name) in `mode` right now,
  // with a try. A granted probe is released at once.
  bool grantable(std::string_view name, Mode mode = Mode::exclusive);
  bool grantable(std::string_view name, Mode mode, const LockOptions& options);
  // Whether it is grantable so, or becomes so within kPatience: after another client's
  // unlock() or dropped Lease, whose release may still be on its way (docs/contract.md).
  bool freed(std::string_view name, Mode mode = Mode::exclusive);
  bool freed(std::string_view name, Mode mode, const LockOptions& options);

 private:
  std::shared_ptr<Backend> backend_;  // shared with the process's other cases on this engine
  std::optional<Client> probe_;  // the client behind grantable() and reported_
  Capabilities caps_;            // pinned by the EngineCase
  Capabilities reported_;        // reported by the engine
  std::string group_;
};

// Skips the current test unless the engine reports capability `cap` (a member of
// warden::Capabilities).
#define WARDEN_SKIP_UNLESS(cap) \
  if (skip_unless(&::warden::Capabilities::cap, #cap)) return

// Skips the current test unless the backend keeps a queue the suite can read.
#define WARDEN_SKIP_UNLESS_QUEUE() \
  if (skip_unless_queue()) return

}  // namespace warden::conformance
