#include "core/watchdog.h"

#include <algorithm>
#include <exception>
#include <set>
#include <string_view>

namespace warden::core {
namespace {

using detail::Hold;
using std::chrono::milliseconds;

// Idle threads still wake this often; it bounds nothing important, it only avoids
// computing with time_point::max().
constexpr auto kIdleWake = std::chrono::seconds(60);

void run_callback(const std::function<void()>& callback) {
  try {
    callback();
  } catch (...) {
    // A throwing user callback must not kill the watchdog: the other leases still
    // need it.
  }
}

}  // namespace

struct Watchdog::State {
  State(std::shared_ptr<Engine> e, std::shared_ptr<Metrics> m, const ClientOptions& o)
      : engine(std::move(e)), metrics(std::move(m)), options(o) {}

  struct Watched {
    std::shared_ptr<Hold> hold;
    Clock::time_point next_renew;
    milliseconds interval;
  };
  struct Releasing {
    std::shared_ptr<Hold> hold;
    Clock::time_point next_try;
    milliseconds backoff;
  };

  // Constant after construction.
  const std::shared_ptr<Engine> engine;
  const std::shared_ptr<Metrics> metrics;
  const ClientOptions options;

  std::mutex mu;
  std::condition_variable_any renewer_cv;
  std::condition_variable_any reaper_cv;
  // Bumped (under mu) to wake a thread, so it can tell a wake-up from a spurious one.
  std::uint64_t renewer_epoch = 0;  // guarded by mu
  std::uint64_t reaper_epoch = 0;   // guarded by mu
  // When each thread will wake by itself; min() while it is awake (it rescans the whole
  // set before it sleeps again). A new lease wakes a thread only if it is due earlier:
  // waking two threads on every acquire would cost two context switches per lock.
  Clock::time_point renewer_sleeps_until = Clock::time_point::min();  // guarded by mu
  Clock::time_point reaper_sleeps_until = Clock::time_point::min();   // guarded by mu

  // Require mu.
  void wake_renewer() {
    ++renewer_epoch;
    renewer_cv.notify_all();
  }
  void wake_reaper() {
    ++reaper_epoch;
    reaper_cv.notify_all();
  }
  void wake_renewer_by(Clock::time_point due) {
    if (due < renewer_sleeps_until) wake_renewer();
  }
  void wake_reaper_by(Clock::time_point due) {
    if (due < reaper_sleeps_until) wake_reaper();
  }
  std::unordered_map<const Hold*, Watched> watched;  // guarded by mu
  std::vector<Releasing> releasing;                  // guarded by mu

  milliseconds renew_interval(const Hold& hold) const {
    if (options.renew_interval.count() > 0) return options.renew_interval;
    return std::max(milliseconds(1), hold.grant.ttl / 3);
  }

  // Declares `hold` lost unless it is no longer active; runs its callback.
  void declare_lost(const std::shared_ptr<Hold>& hold) {
    auto callback = hold->mark_lost();
    if (!callback) return;
    metrics->add(hold->grant.key.group, Counter::losses);
    metrics->observe_hold(hold->grant.key.group, Clock::now() - hold->granted_at);
    run_callback(callback);
  }

  // The backend no longer holds `grant`: its hold becomes lost at once.
  void lose_matching(const GrantRef& grant) {
    std::vector<std::shared_ptr<Hold>> lost;
    {
      std::lock_guard guard(mu);
      for (auto it = watched.begin(); it != watched.end();) {
        const GrantRef& g = it->second.hold->grant;
        if (g.token == grant.token && g.key == grant.key) {
          lost.push_back(std::move(it->second.hold));
          it = watched.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& hold : lost) declare_lost(hold);
  }
};

Watchdog::Watchdog(std::shared_ptr<Engine> engine, std::shared_ptr<Metrics> metrics,
                   const ClientOptions& options)
    : state_(std::make_shared<State>(std::move(engine), std::move(metrics), options)) {
  renewer_ = std::jthread([state = state_](std::stop_token stop) { renewer_loop(state, stop); });
  reaper_ = std::jthread([state = state_](std::stop_token stop) { reaper_loop(state, stop); });
}

Watchdog::~Watchdog() {
  // A user callback run on one of our threads may drop the last reference to the
  // Client; that thread cannot join itself. It still owns `state`, so it can finish
  // its round safely after being detached.
  for (std::jthread* t : {&renewer_, &reaper_}) {
    t->request_stop();
    if (t->get_id() == std::this_thread::get_id()) t->detach();
  }
  {
    std::lock_guard guard(state_->mu);
    state_->wake_renewer();
    state_->wake_reaper();
  }
}

void Watchdog::watch(std::shared_ptr<Hold> hold) {
  std::lock_guard guard(state_->mu);
  const auto interval = state_->renew_interval(*hold);
  const auto next_renew = Clock::now() + interval;
  const auto lost_at = hold->lost_at();
  const Hold* key = hold.get();
  state_->watched[key] = State::Watched{std::move(hold), next_renew, interval};
  if (state_->options.watchdog) state_->wake_renewer_by(next_renew);
  state_->wake_reaper_by(lost_at);
}

void Watchdog::unwatch(const Hold* hold) {
  std::lock_guard guard(state_->mu);
  state_->watched.erase(hold);
}

void Watchdog::replace(const Hold* old, std::shared_ptr<Hold> successor) {
  {
    std::lock_guard guard(state_->mu);
    const auto it = state_->watched.find(old);
    if (it != state_->watched.end()) {
      State::Watched place{std::move(successor), it->second.next_renew, it->second.interval};
      state_->watched.erase(it);
      const Hold* key = place.hold.get();
      state_->watched.emplace(key, std::move(place));
      return;
    }
  }
  watch(std::move(successor));
}

void Watchdog::release_in_background(std::shared_ptr<Hold> hold) {
  std::lock_guard guard(state_->mu);
  state_->watched.erase(hold.get());
  state_->releasing.push_back(
      State::Releasing{std::move(hold), Clock::now(), state_->options.retry.initial});
  state_->wake_renewer();
}

void Watchdog::lost_by_backend(const GrantRef& grant) { state_->lose_matching(grant); }

Engine::LossSink Watchdog::loss_sink() const {
  // Holds only a weak reference: the engine owns the sink and the state owns the engine.
  std::weak_ptr<State> weak = state_;
  return [weak](const GrantRef& grant) {
    if (auto state = weak.lock()) state->lose_matching(grant);
  };
}

void Watchdog::renewer_loop(const std::shared_ptr<State>& state, std::stop_token stop) {
  std::unique_lock lock(state->mu);
  while (!stop.stop_requested()) {
    const auto now = Clock::now();
    auto next = now + kIdleWake;

    std::vector<std::shared_ptr<Hold>> due;
    if (state->options.watchdog) {
      // When a lease is due, every lease due within the next eighth of its interval joins
      // the round: renewing that little early is harmless, and leases granted moments
      // apart then share one batched round (and its retries) instead of a round each.
      bool any_due = false;
      for (auto& [key, w] : state->watched) any_due = any_due || w.next_renew <= now;
      for (auto& [key, w] : state->watched) {
        if (any_due && w.next_renew - w.interval / 8 <= now) {
          due.push_back(w.hold);
        } else {
          next = std::min(next, w.next_renew);
        }
      }
    }
    std::vector<std::shared_ptr<Hold>> to_release;
    for (auto& r : state->releasing) {
      if (r.next_try <= now) {
        to_release.push_back(r.hold);
      } else {
        next = std::min(next, r.next_try);
      }
    }

    if (due.empty() && to_release.empty()) {
      const auto seen = state->renewer_epoch;
      state->renewer_sleeps_until = next;
      state->renewer_cv.wait_until(lock, stop, next, [&] { return state->renewer_epoch != seen; });
      state->renewer_sleeps_until = Clock::time_point::min();
      continue;
    }
    lock.unlock();

    // One batched renewal for every due lease.
    std::vector<GrantRef> grants;
    grants.reserve(due.size());
    for (const auto& h : due) grants.push_back(h->grant);
    std::vector<Renewed> results;
    bool round_failed = false;
    if (!grants.empty()) {
      try {
        results = state->engine->renew(grants);
        round_failed = results.size() != grants.size();
      } catch (...) {
        round_failed = true;
      }
    }

    // Releases the backend has not confirmed yet.
    std::vector<std::shared_ptr<Hold>> released;
    std::vector<std::shared_ptr<Hold>> abandoned;
    for (const auto& h : to_release) {
      try {
        state->engine->release(h->grant);
        released.push_back(h);
      } catch (...) {
        if (Clock::now() >= h->expires()) abandoned.push_back(h);
      }
    }

    std::vector<std::shared_ptr<Hold>> lost;
    lock.lock();
    const auto after = Clock::now();
    for (std::size_t i = 0; i < due.size(); ++i) {
      auto it = state->watched.find(due[i].get());
      if (it == state->watched.end()) continue;  // released or lost meanwhile
      auto& w = it->second;
      if (round_failed || results[i].undecided) {
        // Retry soon; the reaper still enforces the old expiry.
        w.next_renew = after + std::max(milliseconds(5), w.interval / 4);
        continue;
      }
      if (results[i].expires) {
        // A renewal confirmed after the lease's lost_at() comes too late: the lease
        // already reads as lost (Hold::lost), so extend() refuses and the reaper, held
        // up until now, declares it.
        if (w.hold->extend(*results[i].expires)) {
          state->metrics->add(w.hold->grant.key.group, Counter::renewals);
        }
        w.next_renew = after + w.interval;
      } else {
        lost.push_back(std::move(w.hold));
        state->watched.erase(it);
      }
    }
    if (round_failed) {
      // The round failed for every group it was renewing: count it once in each.
      std::set<std::string_view> groups;
      for (const auto& h : due) groups.insert(h->grant.key.group);
      for (const auto group : groups) state->metrics->add(group, Counter::renewal_failures);
    }
    auto done = [&](const State::Releasing& r) {
      return std::find(released.begin(), released.end(), r.hold) != released.end() ||
             std::find(abandoned.begin(), abandoned.end(), r.hold) != abandoned.end();
    };
    for (auto& r : state->releasing) {
      if (!done(r) && r.next_try <= now) {
        r.next_try = after + r.backoff;
        r.backoff = std::min(state->options.retry.max, r.backoff * 2);
      }
    }
    std::erase_if(state->releasing, done);
    lock.unlock();

    for (const auto& h : released) {
      h->finish_release();
      state->metrics->add(h->grant.key.group, Counter::releases);
      state->metrics->observe_hold(h->grant.key.group, Clock::now() - h->granted_at);
    }
    // The lease of an abandoned release has expired: the backend has freed it.
    for (const auto& h : abandoned) h->finish_release();
    for (const auto& h : lost) state->declare_lost(h);
    lost.clear();
    due.clear();
    to_release.clear();
    released.clear();
    abandoned.clear();
    lock.lock();
  }
}

void Watchdog::reaper_loop(const std::shared_ptr<State>& state, std::stop_token stop) {
  std::unique_lock lock(state->mu);
  while (!stop.stop_requested()) {
    const auto now = Clock::now();
    auto next = now + kIdleWake;
    std::vector<std::shared_ptr<Hold>> expired;
    for (auto it = state->watched.begin(); it != state->watched.end();) {
      const auto& hold = it->second.hold;
      // A lease being released is not reaped: its release is in flight.
      const auto deadline = hold->lost_at();
      if (deadline <= now && hold->state() == Hold::State::active) {
        expired.push_back(std::move(it->second.hold));
        it = state->watched.erase(it);
        continue;
      }
      next = std::min(next, deadline <= now ? now + milliseconds(1) : deadline);
      ++it;
    }
    if (expired.empty()) {
      const auto seen = state->reaper_epoch;
      state->reaper_sleeps_until = next;
      state->reaper_cv.wait_until(lock, stop, next, [&] { return state->reaper_epoch != seen; });
      state->reaper_sleeps_until = Clock::time_point::min();
      continue;
    }
    lock.unlock();
    for (const auto& h : expired) state->declare_lost(h);
    expired.clear();
    lock.lock();
  }
}

}  // namespace warden::core
