// core/background_releases.h — Engine::release_async for an engine whose client cannot
// send a release without waiting for its answer (etcd://: a unary gRPC call with member
// failover): a thread of its own makes the blocking calls, one after another, so that
// unlock() returns at once. An engine that can pipeline does better and needs none of
// this (warden://, redis://, zk://). It pays only where a waiting acquire that overtakes
// the client's own release is woken promptly when the release lands, and the wake-up of
// one more thread per release is cheap next to the round trip (docs/performance.md).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "core/engine.h"
#include "core/in_flight.h"

namespace warden::core {

class BackgroundReleases {
 public:
  // `release` is the engine's blocking release (Engine::release).
  explicit BackgroundReleases(std::function<void(const GrantRef&)> release);
  // Sends every release still queued (each bounded by the engine's op_timeout), then
  // stops. Declare it last in the engine, so that the engine is whole meanwhile.
  ~BackgroundReleases();
  BackgroundReleases(const BackgroundReleases&) = delete;
  BackgroundReleases& operator=(const BackgroundReleases&) = delete;

  // Queues the release of `grant`; `done` gets its outcome on the releases' thread.
  void post(const GrantRef& grant, Engine::ReleaseDone done);
  // Returns once every release posted before has called its `done`.
  void settle();

 private:
  void run(const std::stop_token& stop);

  const std::function<void(const GrantRef&)> release_;
  InFlight posted_;  // from post() until its `done` returned
  std::mutex mu_;
  std::condition_variable_any work_;
  std::deque<std::pair<GrantRef, Engine::ReleaseDone>> queue_;  // guarded by mu_
  std::jthread thread_;  // started by the first post; guarded by mu_
};

}  // namespace warden::core
