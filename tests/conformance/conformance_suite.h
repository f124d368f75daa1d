// conformance/conformance_suite.h — the lock contract (DESIGN §2) as one parameterised
// GoogleTest suite, written once and instantiated for every engine.
//
// An engine's test executable links the `warden_conformance` object library and adds
//
//   INSTANTIATE_TEST_SUITE_P(Redis, Conformance,
//                            ::testing::Values(EngineCase{"Redis", start_redis}),
//                            name_printer);
//
// inside namespace warden::conformance. Every test gets a fresh Backend (started in
// SetUp, stopped in TearDown) and a group name of its own, so tests never see each
// other's locks even when an engine's start() hands out one shared server.
//
// The tests assume nothing an engine need not give: hand-off may take a round trip,
// waits are bounded (kPatience), and a clause whose capability the engine does not
// report is skipped with WARDEN_SKIP_UNLESS, not failed.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "conformance/backend.h"
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
// Upper bound for something the contract says happens "at once" or "promptly" (a try on
// a busy lock, a cancelled wait): one backend round trip plus scheduling noise.
inline constexpr Clock::duration kPrompt = 1s;
// How long a test lets a waiter reach the backend's queue before it relies on the
// queue order. No public signal says "queued"; each such test also checks that the
// waiter is still waiting afterwards.
inline constexpr Clock::duration kSettle = 150ms;
// Tolerance for timing comparisons between the client's clock and the backend's.
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
  Client open_client(ClientOptions options = {});
  // Lock options with the library's defaults, adjusted like open_client's.
  LockOptions lock_options() const;
  // This test's group: unique per test (and per process), so no other test sees its
  // locks.
  const std::string& group() const { return group_; }
  // The engine's capabilities as Client::capabilities() reports them.
  const Capabilities& capabilities() const { return caps_; }

  // If the engine lacks `cap`, marks the test skipped (with `what` as the reason) and
  // returns true; the caller must then return. Use WARDEN_SKIP_UNLESS.
  bool skip_unless(bool Capabilities::*cap, std::string_view what);

  // Whether a client of its own could be granted (group(), name) in `mode` right now,
  // with a try. A granted probe is released at once.
  bool grantable(std::string_view name, Mode mode = Mode::exclusive);
  bool grantable(std::string_view name, Mode mode, const LockOptions& options);

 private:
  std::unique_ptr<Backend> backend_;
  std::optional<Client> probe_;  // the client behind grantable() and capabilities()
  Capabilities caps_;
  std::string group_;
};

// Skips the current test unless the engine reports capability `cap` (a member of
// warden::Capabilities).
#define WARDEN_SKIP_UNLESS(cap) \
  if (skip_unless(&::warden::Capabilities::cap, #cap)) return

}  // namespace warden::conformance
