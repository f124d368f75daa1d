#include "warden/client.h"

#include <algorithm>
#include <tuple>

#include "core/client_state.h"
#include "core/names.h"
#include "warden/error.h"

namespace warden {
namespace detail {

ClientState::ClientState(std::string uri_text, ClientOptions client_options,
                         std::shared_ptr<core::Engine> engine)
    : uri(std::move(uri_text)),
      options(client_options),
      capabilities(engine->capabilities()),
      metrics(std::make_shared<core::Metrics>()),
      engine_(std::move(engine)),
      watchdog_(engine_, metrics, options),
      cache_(options.cache_capacity, options.cache_idle,
             [this](core::LockCache::Holds holds) { give_back(std::move(holds)); }),
      revokes_by_watching_(capabilities.cache && !engine_->reports_revokes()) {
  engine_->set_loss_sink(watchdog_.loss_sink());
  if (capabilities.cache) {
    engine_->set_revoke_sink([this](const core::Revoke& revoke) { on_revoke(revoke); });
    if (revokes_by_watching_) {
      watch_revokes_ = std::make_unique<core::WatchRevokes>(
          engine_, [this](const core::Revoke& revoke) { on_revoke(revoke); },
          options.retry.initial);
    }
  }
}

ClientState::~ClientState() {
  // No revoke and no idle sweep runs from here on; the cached grants go back with the
  // releases still due.
  if (capabilities.cache) engine_->set_revoke_sink(nullptr);
  std::unique_ptr<core::WatchRevokes> watching;
  {
    // A release answered on an engine thread may be in unwatch_revokes right now.
    std::lock_guard guard(revokes_mu_);
    watching.swap(watch_revokes_);
  }
  watching.reset();  // joins its threads, whose revokes find watch_revokes_ empty
  cache_.stop_sweeping();
  give_back(cache_.drain());
  // Releases sent without waiting are answered while the watchdog can still take the
  // unconfirmed ones.
  engine_->settle_releases();
  std::map<HoldKey, std::shared_ptr<Hold>> left;
  {
    std::lock_guard guard(mu_);
    left.swap(holds_);
  }
  for (auto& [key, hold] : left) {
    watchdog_.unwatch(hold.get());
    if (!hold->begin_release()) continue;
    try {
      engine_->release(hold->grant);
      metrics->add(hold->grant.key.group, core::Counter::releases);
    } catch (...) {
      // The backend frees it when the lease runs out.
    }
    hold->finish_release();
  }
}

std::shared_ptr<Hold> ClientState::find(const core::LockKey& key) const {
  std::lock_guard guard(mu_);
  auto it = holds_.find(HoldKey{this_thread_key(), key.joined()});
  return it == holds_.end() ? nullptr : it->second;
}

std::shared_ptr<Hold> ClientState::acquire(const core::LockKey& key, Mode mode,
                                           const LockOptions& lock_options,
                                           Clock::time_point deadline, std::stop_token stop) {
  core::require_capabilities(capabilities, mode, lock_options);

  // Reentrancy: count on this thread's hold while it is active. A hold whose last count
  // is being released on another thread (its Lease was moved there) is waited out, then
  // the loop looks again: a confirmed release leaves a fresh acquire, an unconfirmed one
  // an active hold to count on.
  for (auto held = find(key); held; held = find(key)) {
    const auto joined = held->join(mode);
    if (joined == Hold::Join::counted) return held;
    if (joined == Hold::Join::upgrade) {
      throw Error(Errc::would_deadlock,
                  "this thread holds " + key.joined() +
                      " shared; upgrading to exclusive would wait for itself forever");
    }
    if (joined == Hold::Join::lost) {
      throw Error(Errc::lost, "this thread still holds counts of a lost lease of " + key.joined() +
                                  "; release them before acquiring again");
    }
    if (joined == Hold::Join::released) break;  // confirmed; its entry is about to go
    held->wait_until_settled(options.op_timeout);
  }

  if (lock_options.cache) {
    auto taken = cache_.take(key.joined(), mode, lock_options.ttl, lock_options.lock_delay);
    give_back(std::move(taken.give_back));
    if (taken.hit) {
      if (auto hold = unpark(taken.hit, mode)) return hold;
    }
  }
  auto hold = grant(core::AcquireRequest{key, mode, lock_options, deadline, std::move(stop)});
  if (hold) register_hold(hold);
  return hold;
}

void ClientState::register_hold(const std::shared_ptr<Hold>& hold) {
  {
    std::lock_guard guard(mu_);
    holds_[HoldKey{hold->thread, hold->grant.key.joined()}] = hold;
  }
  watchdog_.watch(hold);
}

std::vector<std::shared_ptr<Hold>> ClientState::acquire_set(
    const std::vector<core::AcquireSetRequest::Member>& members, const LockOptions& lock_options,
    Clock::time_point deadline, std::stop_token stop) {
  core::AcquireSetRequest request{members, lock_options, deadline, std::move(stop)};
  request.options.fairness = capabilities.resolve(request.options.fairness);
  for (const auto& member : members) metrics->add(member.key.group, core::Counter::attempts);
  if (request.stop.stop_requested()) {  // cancelled before it began, as in grant()
    for (const auto& member : members) metrics->add(member.key.group, core::Counter::timeouts);
    return {};
  }
  // A try of the set must not find a member still held by this client's own release in
  // flight, as a try of one lock (grant) must not.
  if (deadline <= Clock::now()) {
    for (const auto& member : members) settle_release_of(member.key);
  }
  const auto started = Clock::now();
  std::optional<std::vector<core::Granted>> granted;
  try {
    granted = engine_->acquire_set(request);
  } catch (...) {
    for (const auto& member : members) {
      metrics->add(member.key.group, core::Counter::errors);
      metrics->observe_wait(member.key.group, Clock::now() - started);
    }
    throw;
  }
  const auto now = Clock::now();
  std::vector<std::shared_ptr<Hold>> holds;
  for (const auto& member : members) {
    metrics->observe_wait(member.key.group, now - started);
    metrics->add(member.key.group, granted ? core::Counter::grants : core::Counter::timeouts);
  }
  if (!granted) return holds;
  holds.reserve(granted->size());
  for (std::size_t i = 0; i < granted->size(); ++i) {
    auto hold = std::make_shared<Hold>(this, std::move((*granted)[i].grant), (*granted)[i].expires,
                                       now, this_thread_key());
    hold->add(members[i].mode);
    register_hold(hold);
    holds.push_back(std::move(hold));
  }
  return holds;
}

std::shared_ptr<Hold> ClientState::acquire_permits(const core::LockKey& key, std::uint32_t capacity,
                                                   std::uint32_t permits,
                                                   const LockOptions& lock_options,
                                                   Clock::time_point deadline,
                                                   std::stop_token stop) {
  auto request = permits_request(key, capacity, permits, lock_options, deadline, std::move(stop));
  // Not in holds_: every acquire of permits is a grant of its own, never a count on
  // another (a thread may hold several), and only its Lease can release it.
  auto hold = grant(request);
  if (hold) watchdog_.watch(hold);
  return hold;
}

core::AcquireRequest ClientState::permits_request(const core::LockKey& key,
                                                  std::uint32_t capacity, std::uint32_t permits,
                                                  const LockOptions& lock_options,
                                                  Clock::time_point deadline,
                                                  std::stop_token stop) const {
  core::validate_permits(capacity, permits);
  if (!capabilities.semaphore) {
    throw Error(Errc::unsupported, "this engine has no semaphores");
  }
  // A permit is a shared grant on the seam, but an engine that counts permits need not
  // have a shared mode for locks (mysql://): `semaphore` says it can; fairness and
  // lock-delay are checked as for any grant.
  core::require_capabilities(capabilities, Mode::exclusive, lock_options);
  core::AcquireRequest request{key, Mode::shared, lock_options, deadline, std::move(stop)};
  request.capacity = capacity;
  request.permits = permits;
  return request;
}

core::AcquireRequest ClientState::campaign_request(const core::LockKey& key, std::string value,
                                                   const LockOptions& lock_options,
                                                   Clock::time_point deadline,
                                                   std::stop_token stop) const {
  core::validate_leader_value(value);
  if (!capabilities.election) throw Error(Errc::unsupported, "this engine has no elections");
  core::require_capabilities(capabilities, Mode::exclusive, lock_options);
  core::AcquireRequest request{key, Mode::exclusive, lock_options, deadline, std::move(stop)};
  request.value = std::move(value);
  return request;
}

std::shared_ptr<Hold> ClientState::campaign(const core::LockKey& key, std::string value,
                                            const LockOptions& lock_options,
                                            Clock::time_point deadline, std::stop_token stop) {
  auto request = campaign_request(key, std::move(value), lock_options, deadline, std::move(stop));
  // Not in holds_, as for permits: every campaign is a candidate of its own.
  auto hold = grant(std::move(request));
  if (hold) watchdog_.watch(hold);
  return hold;
}

std::shared_ptr<Hold> ClientState::grant(core::AcquireRequest request) {
  // Engines see the fairness the request gets, never `automatic`.
  request.options.fairness = capabilities.resolve(request.options.fairness);

  const auto& group = request.key.group;
  metrics->add(group, core::Counter::attempts);
  if (request.stop.stop_requested()) {
    metrics->add(group, core::Counter::timeouts);
    return nullptr;  // cancelled before it began: the backend is not asked (lock.h)
  }
  // A try must not find the lock still held by this client's own release in flight.
  if (request.deadline <= Clock::now()) settle_release_of(request.key);
  // Read before the request goes out: a revoke of everything after this covers its grant.
  Hold::Caching caching{false, request.options.cache ? cache_.epoch() : 0, request.options.ttl,
                        request.options.lock_delay};
  const auto started = Clock::now();
  std::optional<core::Granted> granted;
  try {
    granted = engine_->acquire(request);
  } catch (...) {
    metrics->add(group, core::Counter::errors);
    metrics->observe_wait(group, Clock::now() - started);
    throw;
  }
  const auto now = Clock::now();
  metrics->observe_wait(group, now - started);
  if (!granted) {
    metrics->add(group, core::Counter::timeouts);
    return nullptr;
  }
  metrics->add(group, core::Counter::grants);
  caching.cacheable = request.options.cache && (revokes_by_watching_ || granted->cacheable);
  auto hold = std::make_shared<Hold>(this, std::move(granted->grant), granted->expires, now,
                                     this_thread_key(), caching);
  hold->add(request.mode);
  if (caching.cacheable && revokes_by_watching_) {
    std::lock_guard guard(revokes_mu_);
    if (watch_revokes_) watch_revokes_->start(hold->grant);
  }
  return hold;
}

std::shared_ptr<AsyncAcquire> ClientState::grant_async(const std::shared_ptr<ClientState>& self,
                                                       core::AcquireRequest request,
                                                       AcquireCallback callback,
                                                       Executor executor) {
  if (!callback) throw Error(Errc::invalid_argument, "an asynchronous acquire needs a callback");
  auto op = std::make_shared<AsyncAcquire>(
      std::move(callback), executor ? std::move(executor) : completion_executor());
  request.options.fairness = capabilities.resolve(request.options.fairness);
  request.options.cache = false;  // an asynchronous acquire's grant is never kept cached
  request.stop = op->stop_token();
  const std::string group = request.key.group;
  metrics->add(group, core::Counter::attempts);
  if (request.stop.stop_requested()) {
    metrics->add(group, core::Counter::timeouts);
    op->finish(nullptr);
    return op;
  }
  // A try must not find the lock still held by this client's own release in flight (as
  // in grant(): bounded by op_timeout, and only when such a release is under way).
  if (request.deadline <= Clock::now()) settle_release_of(request.key);
  const Mode mode = request.mode;
  const auto started = Clock::now();
  auto done = [self, op, mode, group, started](std::optional<core::Granted> granted,
                                               std::exception_ptr error) {
    const auto now = Clock::now();
    auto& counted = *self->metrics;
    counted.observe_wait(group, now - started);
    if (error || !granted) {
      counted.add(group, error ? core::Counter::errors : core::Counter::timeouts);
      op->finish(error);
      return;
    }
    counted.add(group, core::Counter::grants);
    auto hold = std::make_shared<Hold>(self.get(), std::move(granted->grant), granted->expires,
                                       now, ThreadKey{0});
    hold->add(mode);
    self->watchdog_.watch(hold);
    op->finish(nullptr, self, std::move(hold), mode);
  };
  try {
    engine_->acquire_async(std::move(request), done);
  } catch (...) {  // an engine must not throw here; should one, the caller still hears once
    done(std::nullopt, std::current_exception());
  }
  return op;
}

Executor ClientState::completion_executor() {
  return [this](std::function<void()> work) { completions_.post(std::move(work)); };
}

void ClientState::forget(const Hold& hold) {
  std::lock_guard guard(mu_);
  auto it = holds_.find(HoldKey{hold.thread, hold.grant.key.joined()});
  if (it != holds_.end() && it->second.get() == &hold) holds_.erase(it);
}

bool ClientState::remove_count(const std::shared_ptr<Hold>& hold, Mode mode) {
  // The last count leaves `active` in the same step, so no other thread can join this
  // hold from here on.
  const auto removed = hold->remove(mode);
  if (removed == Hold::Removed::counts_left) return false;
  if (removed == Hold::Removed::nothing_to_release) {
    // Lost (or already released): the backend no longer holds it, nothing to send. Its
    // revoke watch ends with it: kept, its thread and backend watch would outlive it, and
    // a stale revoke of it could be taken for a live grant's. A lapsed hold the watchdog
    // has yet to declare stays watched, so that its loss is still told and counted.
    if (hold->state() != Hold::State::active) watchdog_.unwatch(hold.get());
    forget(*hold);
    unwatch_revokes(*hold);
    return false;
  }
  return true;
}

void ClientState::release_async(const std::shared_ptr<ClientState>& self,
                                const std::shared_ptr<Hold>& hold, Mode mode,
                                Lease::ReleaseCallback done, Executor executor) {
  // `self` rides along until the answer is told. A callback that throws has its
  // exception dropped; an executor that refuses the work has it run on the spot.
  //
  // `self` may be the Client's last reference (its handles dropped while the release was
  // under way). It goes with the work and is let go where the work runs, never on the
  // engine's thread that tells the release: closing the engine there would wait for that
  // very thread. The told `tell` (kept by the engine until it forgets it) holds no
  // reference, and each copy of the work shares the one `keep`, emptied as the work runs.
  // `self = self`, not `self`: a plain capture of the const reference would be a const
  // member, which std::move copies instead of emptying.
  auto tell = [self = self, done = std::move(done),
               executor = executor ? std::move(executor) : completion_executor()](
                  std::exception_ptr error) mutable {
    auto keep = std::make_shared<std::shared_ptr<ClientState>>(std::move(self));
    auto work = [done, error, keep] {
      try {
        done(error);
      } catch (...) {
      }
      keep->reset();
    };
    try {
      executor(work);
    } catch (...) {
      work();
    }
  };
  if (!remove_count(hold, mode)) {
    tell(nullptr);
    return;
  }
  // As Lease::release(): a cacheable grant goes back too.
  if (hold->caching.cacheable) metrics->add(hold->grant.key.group, core::Counter::cache_give_backs);
  release_without_waiting(hold, std::move(tell));
}

void ClientState::release(const std::shared_ptr<Hold>& hold, Mode mode, bool report) {
  if (!remove_count(hold, mode)) return;
  const auto& group = hold->grant.key.group;
  // unlock() and a dropped Lease keep a cacheable grant; Lease::release() gives it back.
  if (hold->caching.cacheable) {
    if (!report && park(hold)) return;
    metrics->add(group, core::Counter::cache_give_backs);
  }
  if (!report) {
    release_without_waiting(hold);
    return;
  }
  try {
    engine_->release(hold->grant);
  } catch (...) {
    metrics->add(group, core::Counter::release_failures);
    if (report) {
      hold->abort_release(mode);
      throw;
    }
    forget(*hold);
    watchdog_.release_in_background(hold);
    return;
  }
  watchdog_.unwatch(hold.get());
  forget(*hold);
  hold->finish_release();
  unwatch_revokes(*hold);
  metrics->add(group, core::Counter::releases);
  metrics->observe_hold(group, Clock::now() - hold->granted_at);
}

std::shared_ptr<Hold> ClientState::unpark(const std::shared_ptr<Hold>& parked, Mode mode) {
  Hold::Caching caching = parked->caching;
  ++caching.reuse;  // a new hold of the same grant: fences tell it from the earlier ones
  auto hold = std::make_shared<Hold>(this, parked->grant, parked->expires(), Clock::now(),
                                     this_thread_key(), caching);
  hold->add(mode);
  watchdog_.replace(parked.get(), hold);
  if (parked->state() != Hold::State::active || parked->lost()) {
    // Its lease ran out while it was being taken (or before, with the watchdog's thread
    // yet to tell it): the fresh hold must not serve.
    watchdog_.unwatch(hold.get());
    unwatch_revokes(*parked);
    return nullptr;
  }
  {
    std::lock_guard guard(mu_);
    holds_[HoldKey{hold->thread, hold->grant.key.joined()}] = hold;
  }
  metrics->add(hold->grant.key.group, core::Counter::cache_hits);
  return hold;
}

bool ClientState::park(const std::shared_ptr<Hold>& hold) {
  if (cache_.revoked(*hold)) return false;
  auto parked = std::make_shared<Hold>(this, hold->grant, hold->expires(), hold->granted_at,
                                       ThreadKey{0}, hold->caching);
  watchdog_.replace(hold.get(), parked);
  forget(*hold);
  hold->finish_release();
  give_back(cache_.park(std::move(parked)));
  return true;
}

void ClientState::give_back(core::LockCache::Holds holds) {
  for (auto& hold : holds) {
    if (!hold->begin_release()) {
      watchdog_.unwatch(hold.get());  // lost while cached: nothing to release
      unwatch_revokes(*hold);
      continue;
    }
    metrics->add(hold->grant.key.group, core::Counter::cache_give_backs);
    release_without_waiting(hold);
  }
}

void ClientState::unwatch_revokes(const Hold& hold) {
  if (!hold.caching.cacheable || !revokes_by_watching_) return;
  std::lock_guard guard(revokes_mu_);
  if (watch_revokes_) watch_revokes_->stop(hold.grant);
}

void ClientState::on_revoke(const core::Revoke& revoke) {
  if (revoke.everything) {
    give_back(cache_.revoke_everything());
    return;
  }
  metrics->add(revoke.key.group, core::Counter::cache_revokes);
  give_back(cache_.revoke(revoke.key.joined(), revoke.token));
}

void ClientState::release_without_waiting(const std::shared_ptr<Hold>& hold,
                                          std::function<void(std::exception_ptr)> then) {
  // Forgotten at once: the thread's next acquire of this lock takes a fresh grant.
  forget(*hold);
  {
    std::lock_guard guard(mu_);
    ++releasing_[hold->grant.key.joined()];
  }
  const auto released_at = Clock::now();
  engine_->release_async(hold->grant, [this, hold, released_at, then = std::move(then)](
                                         std::exception_ptr error) {
    released(hold, released_at, error);
    if (then) then(error);
  });
}

void ClientState::released(const std::shared_ptr<Hold>& hold, Clock::time_point released_at,
                           const std::exception_ptr& error) {
  const auto& group = hold->grant.key.group;
  unwatch_revokes(*hold);
  if (error) {
    metrics->add(group, core::Counter::release_failures);
    watchdog_.release_in_background(hold);
  } else {
    watchdog_.unwatch(hold.get());
    hold->finish_release();
    metrics->add(group, core::Counter::releases);
    metrics->observe_hold(group, released_at - hold->granted_at);
  }
  std::lock_guard guard(mu_);
  auto it = releasing_.find(hold->grant.key.joined());
  if (it != releasing_.end() && --it->second == 0) releasing_.erase(it);
}

void ClientState::settle_release_of(const core::LockKey& key) {
  {
    std::lock_guard guard(mu_);
    if (!releasing_.contains(key.joined())) return;
  }
  engine_->settle_releases();
}

void ClientState::settle_releases() {
  {
    std::lock_guard guard(mu_);
    if (releasing_.empty()) return;
  }
  engine_->settle_releases();
}

bool ClientState::check(const Sequencer& sequencer) {
  if (!capabilities.check) {
    throw Error(Errc::unsupported, "this engine cannot check sequencers");
  }
  settle_release_of(core::LockKey{sequencer.group, sequencer.name});
  return engine_->check(sequencer);
}

}  // namespace detail

namespace {
// The client's lock defaults for a primitive that is never cached (a semaphore, an
// election, a multi-lock), so that caching locks by default does not refuse them.
LockOptions uncached(LockOptions options) {
  options.cache = false;
  return options;
}
}  // namespace

Client::Client(std::shared_ptr<detail::ClientState> state) : state_(std::move(state)) {}

// Client::open is compose/open_client.cc's: opening means choosing an engine, which
// the core does not know.

Lock Client::lock(std::string_view group, std::string_view name) const {
  return lock(group, name, state_->options.lock_defaults);
}

Lock Client::lock(std::string_view group, std::string_view name, LockOptions options) const {
  core::validate_group(group);
  core::validate_name(name);
  core::validate_lock_options(options);
  return Lock(state_, std::string(group), std::string(name), options);
}

Locks Client::locks(std::string_view group) const {
  return locks(group, state_->options.lock_defaults);
}

Locks Client::locks(std::string_view group, LockOptions options) const {
  core::validate_group(group);
  core::validate_lock_options(options);
  return Locks(state_, std::string(group), options);
}

Semaphore Client::semaphore(std::string_view group, std::string_view name,
                            std::uint32_t permits) const {
  return semaphore(group, name, permits, uncached(state_->options.lock_defaults));
}

Semaphore Client::semaphore(std::string_view group, std::string_view name, std::uint32_t permits,
                            LockOptions options) const {
  core::validate_group(group);
  core::validate_name(name);
  core::validate_lock_options(options);
  core::validate_capacity(permits);
  core::refuse_cache(options, "a semaphore");
  if (!state_->capabilities.semaphore) {
    throw Error(Errc::unsupported, "this engine has no semaphores");
  }
  return Semaphore(state_, std::string(group), std::string(name), permits, options);
}

Election Client::election(std::string_view group, std::string_view name) const {
  return election(group, name, uncached(state_->options.lock_defaults));
}

Election Client::election(std::string_view group, std::string_view name,
                          LockOptions options) const {
  core::validate_group(group);
  core::validate_name(name);
  core::validate_lock_options(options);
  core::refuse_cache(options, "an election");
  if (!state_->capabilities.election)
    throw Error(Errc::unsupported, "this engine has no elections");
  core::require_capabilities(state_->capabilities, Mode::exclusive, options);
  return Election(state_, std::string(group), std::string(name), options);
}

MultiLock Client::multi(std::vector<LockSpec> members) const {
  return multi(std::move(members), uncached(state_->options.lock_defaults));
}

MultiLock Client::multi(std::vector<LockSpec> members, LockOptions options) const {
  if (members.empty()) throw Error(Errc::invalid_argument, "a multi-lock needs members");
  if (members.size() > core::kMaxMultiMembers) {
    throw Error(Errc::invalid_argument, "a multi-lock has at most " +
                                            std::to_string(core::kMaxMultiMembers) +
                                            " members, not " + std::to_string(members.size()));
  }
  core::validate_lock_options(options);
  core::refuse_cache(options, "a multi-lock");
  for (const LockSpec& member : members) {
    core::validate_group(member.group);
    core::validate_name(member.name);
  }
  // The one global order that keeps multi-locks from deadlocking each other.
  std::sort(members.begin(), members.end(), [](const LockSpec& a, const LockSpec& b) {
    return std::tie(a.group, a.name) < std::tie(b.group, b.name);
  });
  const auto same_lock = [](const LockSpec& a, const LockSpec& b) {
    return a.group == b.group && a.name == b.name;
  };
  if (auto twice = std::adjacent_find(members.begin(), members.end(), same_lock);
      twice != members.end()) {
    throw Error(Errc::invalid_argument,
                "a multi-lock names " + twice->group + '/' + twice->name + " twice");
  }
  for (const LockSpec& member : members) {
    core::require_capabilities(state_->capabilities, member.mode, options);
  }
  return MultiLock(state_, std::move(members), options);
}

bool Client::check(const Sequencer& sequencer) const {
  core::validate_group(sequencer.group);
  core::validate_name(sequencer.name);
  return state_->check(sequencer);
}

bool Client::check(std::string_view sequencer) const { return check(Sequencer::parse(sequencer)); }

Capabilities Client::capabilities() const { return state_->capabilities; }

const std::string& Client::uri() const { return state_->uri; }

std::string Client::metrics_text() const { return state_->metrics->render(); }

}  // namespace warden
