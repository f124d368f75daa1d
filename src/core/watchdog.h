// core/watchdog.h — keeps a Client's leases alive and declares them lost in time.
//
// Two threads per Client:
//   - the renewer renews due leases in one engine call per round (engines batch them)
//     and retries releases the backend did not confirm;
//   - the reaper declares a lease lost when its conservative local expiry passes.
// They are separate so that a renewal stuck in a dead backend (up to op_timeout) can
// never delay the lost signal.
//
// The lost rule (DESIGN §2): a lease's local expiry is computed by the engine from the
// *send* time of the request that created or last renewed it. The reaper fires a
// further safety margin of ttl/100 + 20 ms earlier, to cover clock-rate drift between
// client and backend and its own wake-up latency.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/engine.h"
#include "core/hold.h"
#include "core/metrics.h"
#include "warden/options.h"

namespace warden::core {

class Watchdog {
 public:
  Watchdog(std::shared_ptr<Engine> engine, std::shared_ptr<Metrics> metrics,
           const ClientOptions& options);
  ~Watchdog();  // stops both threads
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts renewing (if the watchdog is on) and enforcing the expiry of `hold`.
  void watch(std::shared_ptr<detail::Hold> hold);
  // Stops both for `hold` (it was released or lost).
  void unwatch(const detail::Hold* hold);
  // Hands `old`'s place to `successor`, a hold of the same grant (lock caching moves a
  // grant between a thread's hold and the cache's): it is renewed when `old` would have
  // been. Watches `successor` afresh if `old` is not watched.
  void replace(const detail::Hold* old, std::shared_ptr<detail::Hold> successor);
  // Retries the release of `hold` until the backend confirms it or the lease has
  // certainly expired. The hold is no longer renewed.
  void release_in_background(std::shared_ptr<detail::Hold> hold);
  // The engine learnt that a grant is gone: its hold becomes lost at once.
  void lost_by_backend(const GrantRef& grant);
  // A sink for Engine::set_loss_sink that does not keep the watchdog alive.
  Engine::LossSink loss_sink() const;

 private:
  struct State;  // shared with the threads, so it outlives them whatever thread ends last
  static void renewer_loop(const std::shared_ptr<State>& state, std::stop_token stop);
  static void reaper_loop(const std::shared_ptr<State>& state, std::stop_token stop);

  std::shared_ptr<State> state_;
  std::jthread renewer_;
  std::jthread reaper_;
};

}  // namespace warden::core
