#include "core/watch_revokes.h"

#include <vector>

#include "core/stoppable_sleep.h"

namespace warden::core {

WatchRevokes::WatchRevokes(std::shared_ptr<Engine> engine, Engine::RevokeSink on_revoke,
                           std::chrono::milliseconds retry)
    : engine_(std::move(engine)), on_revoke_(std::move(on_revoke)), retry_(retry) {}

WatchRevokes::~WatchRevokes() {
  std::map<Id, std::jthread> watches;
  {
    std::lock_guard guard(mu_);
    watches.swap(watches_);
  }
  for (auto& [id, thread] : watches) thread.request_stop();
  // The jthreads join as `watches` goes.
}

void WatchRevokes::start(const GrantRef& grant) {
  std::lock_guard guard(mu_);
  reap();
  Id id{grant.key.joined(), grant.token};
  if (watches_.contains(id)) return;
  watches_.emplace(id, std::jthread([this, grant](std::stop_token stop) {
                     watch(grant, stop);
                     std::lock_guard done(mu_);
                     ended_[Id{grant.key.joined(), grant.token}] = true;
                   }));
}

void WatchRevokes::stop(const GrantRef& grant) {
  // Only asked to stop, never joined here: stop() runs on engine threads (a release's
  // completion), and a watch may be inside an engine call that needs that very thread
  // (zk://: a synchronous call waits for the completion thread). The thread is joined
  // by a later start() once it has ended, or by the destructor.
  std::lock_guard guard(mu_);
  const auto it = watches_.find(Id{grant.key.joined(), grant.token});
  if (it != watches_.end()) it->second.request_stop();
}

void WatchRevokes::reap() {
  for (auto it = ended_.begin(); it != ended_.end(); it = ended_.erase(it)) {
    const auto w = watches_.find(it->first);
    if (w == watches_.end()) continue;
    // It has set `ended_` under mu_, its last step: nothing of it touches `this` again.
    w->second.detach();
    watches_.erase(w);
  }
}

void WatchRevokes::watch(const GrantRef& grant, const std::stop_token& stop) {
  std::unique_ptr<KeyWatch> watch;
  while (!stop.stop_requested()) {
    try {
      if (!watch) {
        watch = engine_->watch_requests(grant.key);
        if (!watch) return;  // the engine cannot watch after all: nothing to revoke by
        // Requests that came before the watch began are seen by looking.
        const LockStatus status = engine_->inspect(grant.key);
        if (!status.waiters.empty()) break;
      }
      if (watch->wait(Clock::now() + std::chrono::hours(1), stop)) break;
      if (watch->broken()) watch.reset();
    } catch (const Error&) {
      watch.reset();
      sleep_for(retry_, stop);
    }
  }
  if (stop.stop_requested()) return;
  on_revoke_(Revoke{grant.key, grant.token, false});
}

}  // namespace warden::core
