#include "engines/mem/mem_engine.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "table/lock_table.h"
#include "warden/error.h"

namespace warden::engines::mem {
namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;

// One named table shared by the engines of this process.
struct SharedTable {
  std::mutex mu;
  std::condition_variable_any changed;  // notified whenever outcomes_ gains entries
  table::LockTable table;               // guarded by mu
  // Outcomes of queued requests (granted / timed out), picked up by their waiters.
  std::unordered_map<table::RequestId, table::Event> outcomes;  // guarded by mu
  // Election::observe's watches (MemEngine::watch): a count of the table's changes of
  // holders, and their own condition variable, notified only while any watch waits,
  // so that the lock path pays nothing for them. Guarded by mu.
  std::uint64_t changes = 0;
  int watching = 0;
  std::condition_variable_any watched;

  // A grant, release, expiry or proclaim happened. Requires mu.
  void touched() {
    ++changes;
    if (watching > 0) watched.notify_all();
  }

  // Asynchronous acquires queued in the table (MemEngine::acquire_async), by request id,
  // and those finished whose `done` is still to be called. Guarded by mu. While there
  // are any, a driver thread (drive) advances the table's clock, as blocking waiters do
  // for themselves, and calls `done` outside mu.
  using StopCallback = std::stop_callback<std::function<void()>>;
  struct AsyncWait {
    std::function<Granted(const table::Grant&)> granted;  // called with mu held
    core::Engine::AcquireDone done;
    std::unique_ptr<StopCallback> on_stop;  // destroyed outside mu: it takes mu
  };
  struct Finished {
    core::Engine::AcquireDone done;
    std::optional<Granted> granted;
    std::unique_ptr<StopCallback> on_stop;
  };
  std::unordered_map<table::RequestId, AsyncWait> async_waits;
  std::vector<Finished> finished;
  bool driving = false;                 // a driver thread runs
  std::uint64_t pokes = 0;              // a wait was added or finished: the driver looks again
  std::condition_variable_any driver;  // notified with pokes

  // Moves the table's events to the waiters. Requires mu.
  void deliver() {
    bool any = false;
    for (auto& event : table.take_events()) {
      if (event.kind != table::Event::Kind::timed_out) touched();
      if (event.kind == table::Event::Kind::expired) continue;
      if (auto it = async_waits.find(event.grant.id); it != async_waits.end()) {
        std::optional<Granted> granted;
        if (event.kind == table::Event::Kind::granted) granted = it->second.granted(event.grant);
        finish(it, std::move(granted));
        continue;
      }
      outcomes.insert_or_assign(event.grant.id, std::move(event));
      any = true;
    }
    if (any) changed.notify_all();
  }

  // The asynchronous wait `it` ended with `granted` (nullopt: timed out, cancelled).
  // Requires mu.
  void finish(std::unordered_map<table::RequestId, AsyncWait>::iterator it,
              std::optional<Granted> granted) {
    finished.push_back(
        Finished{std::move(it->second.done), std::move(granted), std::move(it->second.on_stop)});
    async_waits.erase(it);
    poke();
  }

  // Requires mu.
  void poke() {
    ++pokes;
    driver.notify_one();
  }

  // The driver thread's loop (started by MemEngine::acquire_async): ends when no
  // asynchronous wait is left. It holds the table, never an engine.
  static void drive(std::shared_ptr<SharedTable> shared) {
    SharedTable& s = *shared;
    std::unique_lock lock(s.mu);
    while (true) {
      if (!s.finished.empty()) {
        std::vector<Finished> batch;
        batch.swap(s.finished);
        lock.unlock();
        for (Finished& f : batch) {
          f.on_stop.reset();  // waits for a cancellation running on another thread
          f.done(std::move(f.granted), nullptr);
        }
        batch.clear();  // what the callbacks captured goes outside mu, too
        lock.lock();
        continue;
      }
      if (s.async_waits.empty()) {
        s.driving = false;
        return;
      }
      auto wake = Clock::now() + std::chrono::seconds(60);
      if (auto next = s.table.next_wakeup()) wake = std::min(wake, *next);
      const auto seen = s.pokes;
      s.driver.wait_until(lock, wake, [&] { return s.pokes != seen; });
      s.table.advance(Clock::now());
      s.deliver();
    }
  }
};

std::mutex registry_mu;
std::unordered_map<std::string, std::weak_ptr<SharedTable>> registry;  // guarded by registry_mu

std::shared_ptr<SharedTable> find_or_create(const std::string& name) {
  std::lock_guard guard(registry_mu);
  auto& weak = registry[name];
  auto table = weak.lock();
  if (!table) {
    table = std::make_shared<SharedTable>();
    weak = table;
  }
  // Forget names whose tables are gone, so one-off names do not accumulate.
  std::erase_if(registry, [](const auto& entry) { return entry.second.expired(); });
  registry[name] = table;
  return table;
}

// The KeyWatch of mem:// (MemEngine::watch).
class TableWatch final : public core::KeyWatch {
 public:
  TableWatch(std::shared_ptr<SharedTable> shared, std::uint64_t seen)
      : shared_(std::move(shared)), seen_(seen) {}

  bool wait(Clock::time_point until, const std::stop_token& stop) override {
    SharedTable& s = *shared_;
    std::unique_lock lock(s.mu);
    ++s.watching;
    const bool changed = s.watched.wait_until(lock, stop, until, [&] { return s.changes != seen_; });
    --s.watching;
    seen_ = s.changes;
    return changed;
  }
  bool broken() const override { return false; }
  bool complete() const override { return false; }

 private:
  const std::shared_ptr<SharedTable> shared_;
  std::uint64_t seen_;
};

class MemEngine final : public core::Engine {
 public:
  explicit MemEngine(std::shared_ptr<SharedTable> shared) : shared_(std::move(shared)) {}

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.shared = true;
    caps.fair = true;
    caps.non_fair = true;
    caps.lock_delay = true;
    caps.fencing = true;
    caps.durable_tokens = false;  // the table lives and dies with the process
    caps.check = true;
    caps.semaphore = true;
    caps.atomic_multi = true;  // the table's set requests
    caps.election = true;      // values on the table's requests
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    SharedTable& s = *shared_;
    const table::Request r = to_table(request);
    std::unique_lock lock(s.mu);
    if (request.stop.stop_requested()) return std::nullopt;
    const auto result = s.table.acquire(r, Clock::now());
    s.deliver();
    switch (result.status) {
      case table::AcquireStatus::granted:
        s.touched();
        return to_granted(request.key, request.options.ttl, result.grant);
      case table::AcquireStatus::busy:
        return std::nullopt;
      case table::AcquireStatus::mismatch:
        throw mismatch(request);
      case table::AcquireStatus::queued:
        break;
    }

    const auto event = wait_for(result.id, request.stop, lock);
    if (!event) return std::nullopt;
    return to_granted(request.key, request.options.ttl, event->grant);
  }

  // Waits in the table without a thread: the request queues there, and its grant or
  // timeout is told to `done` by the table's driver thread (SharedTable::drive).
  void acquire_async(AcquireRequest request, AcquireDone done) override {
    const std::shared_ptr<SharedTable> shared = shared_;
    SharedTable& s = *shared;
    std::unique_lock lock(s.mu);
    if (request.stop.stop_requested()) {
      lock.unlock();
      done(std::nullopt, nullptr);
      return;
    }
    const auto result = s.table.acquire(to_table(request), Clock::now());
    s.deliver();
    switch (result.status) {
      case table::AcquireStatus::granted: {
        s.touched();
        auto granted = to_granted(request.key, request.options.ttl, result.grant);
        lock.unlock();
        done(std::move(granted), nullptr);
        return;
      }
      case table::AcquireStatus::busy:
        lock.unlock();
        done(std::nullopt, nullptr);
        return;
      case table::AcquireStatus::mismatch:
        lock.unlock();
        done(std::nullopt, std::make_exception_ptr(mismatch(request)));
        return;
      case table::AcquireStatus::queued:
        break;
    }
    const table::RequestId id = result.id;
    s.async_waits.emplace(
        id, SharedTable::AsyncWait{[this, key = request.key, ttl = request.options.ttl](
                                       const table::Grant& grant) {
                                     return to_granted(key, ttl, grant);
                                   },
                                   std::move(done), nullptr});
    if (!s.driving) {
      s.driving = true;
      std::thread(&SharedTable::drive, shared).detach();  // ends when no wait is left
    }
    s.poke();  // a new deadline may be the table's next timer
    lock.unlock();

    // Cancellation: registered outside mu, since a stop already requested runs it here.
    auto on_stop = std::make_unique<SharedTable::StopCallback>(
        request.stop, std::function<void()>([shared, id] { cancel_async(*shared, id); }));
    lock.lock();
    if (auto it = s.async_waits.find(id); it != s.async_waits.end()) {
      it->second.on_stop = std::move(on_stop);
      return;
    }
    lock.unlock();  // finished meanwhile; the callback, if it ran, is done
  }

  bool waits_without_threads() const override { return true; }

  std::optional<std::vector<Granted>> acquire_set(const core::AcquireSetRequest& request) override {
    SharedTable& s = *shared_;
    table::SetRequest r;
    for (const auto& member : request.members)
      r.members.push_back({member.key.joined(), member.mode});
    r.ttl = request.options.ttl;
    r.lock_delay = request.options.lock_delay;
    r.fair = request.options.fairness == Fairness::fifo;
    r.deadline = request.deadline;

    std::unique_lock lock(s.mu);
    if (request.stop.stop_requested()) return std::nullopt;
    const auto result = s.table.acquire_set(r, Clock::now());
    s.deliver();
    std::vector<table::Grant> grants;
    switch (result.status) {
      case table::AcquireStatus::granted:
        s.touched();
        grants = result.grants;
        break;
      case table::AcquireStatus::busy:
        return std::nullopt;
      case table::AcquireStatus::mismatch:
        throw Error(Errc::invalid_argument, "a multi-lock member is a semaphore");
      case table::AcquireStatus::queued: {
        auto event = wait_for(result.id, request.stop, lock);
        if (!event) return std::nullopt;
        grants = std::move(event->grants);
        break;
      }
    }
    std::vector<Granted> granted;
    granted.reserve(grants.size());
    for (std::size_t i = 0; i < grants.size(); ++i) {
      granted.push_back(to_granted(request.members[i].key, request.options.ttl, grants[i]));
    }
    return granted;
  }

  std::vector<Renewed> renew(std::span<const GrantRef> grants) override {
    SharedTable& s = *shared_;
    std::lock_guard guard(s.mu);
    std::vector<Renewed> out;
    out.reserve(grants.size());
    for (const auto& g : grants) {
      if (mine_.count(Owned{g.key.joined(), g.token}) == 0) {
        out.push_back(Renewed::lost());  // not this engine's grant
        continue;
      }
      // Same process, same clock: the table's expiry is exact, not an estimate.
      out.push_back(Renewed{s.table.renew(g.key.joined(), g.token, g.ttl, Clock::now())});
      if (!out.back().expires) mine_.erase(Owned{g.key.joined(), g.token});  // lost
    }
    s.deliver();
    return out;
  }

  void release(const GrantRef& grant) override {
    SharedTable& s = *shared_;
    std::lock_guard guard(s.mu);
    // Idempotent, and a no-op for a grant this engine did not make.
    if (mine_.erase(Owned{grant.key.joined(), grant.token}) == 0) return;
    if (s.table.release(grant.key.joined(), grant.token, Clock::now())) s.touched();
    s.deliver();
  }

  bool proclaim(const GrantRef& grant, std::string_view value) override {
    SharedTable& s = *shared_;
    std::lock_guard guard(s.mu);
    if (!mine_.contains(Owned{grant.key.joined(), grant.token})) return false;
    s.table.advance(Clock::now());
    s.deliver();
    if (!s.table.set_value(grant.key.joined(), grant.token, std::string(value))) return false;
    s.touched();
    return true;
  }

  // Election::observe's watch: woken by any change of holders in the table (any key:
  // in-process, a look costs little). A lease that runs out is noticed only when a call
  // brings the table's clock past it, so the watch is not complete and the observer
  // also polls.
  std::unique_ptr<core::KeyWatch> watch(const core::LockKey& /*key*/) override {
    std::lock_guard guard(shared_->mu);
    return std::make_unique<TableWatch>(shared_, shared_->changes);
  }

  bool check(const Sequencer& sequencer) override {
    SharedTable& s = *shared_;
    std::lock_guard guard(s.mu);
    s.table.advance(Clock::now());
    s.deliver();
    const auto grant = s.table.find(sequencer.group + '/' + sequencer.name, sequencer.token);
    return grant && grant->mode == sequencer.mode;
  }

  LockStatus inspect(const core::LockKey& key) override {
    std::lock_guard guard(shared_->mu);
    const auto now = fresh();
    return status_of(shared_->table, key, now);
  }

  std::vector<LockSummary> list(std::string_view group) override {
    std::lock_guard guard(shared_->mu);
    fresh();
    return summaries_of(shared_->table, group);
  }

 private:
  using Owned = std::pair<std::string, std::uint64_t>;  // ("group/name", token)
  static constexpr std::size_t kPruneAbove = 1024;

  // Brings the table to now, so that status shows no lapsed lease. Requires mu.
  Clock::time_point fresh() {
    const auto now = Clock::now();
    shared_->table.advance(now);
    shared_->deliver();
    return now;
  }

  static table::Request to_table(const AcquireRequest& request) {
    table::Request r;
    r.key = request.key.joined();
    r.mode = request.mode;
    r.ttl = request.options.ttl;
    r.lock_delay = request.options.lock_delay;
    r.fair = request.options.fairness == Fairness::fifo;
    r.deadline = request.deadline;
    r.capacity = request.capacity;
    r.permits = request.permits;
    r.value = request.value;
    return r;
  }

  static Error mismatch(const AcquireRequest& request) {
    return Error(Errc::invalid_argument, "lock " + request.key.joined() +
                                             " is a semaphore of another number of permits, "
                                             "or not one");
  }

  // The asynchronous wait `id` was cancelled: out of the table, and finished ungranted —
  // or granted, if the grant came in the same instant (the core then releases it).
  static void cancel_async(SharedTable& s, table::RequestId id) {
    std::lock_guard guard(s.mu);
    if (!s.async_waits.contains(id)) return;  // finished already
    s.table.cancel(id, Clock::now());
    s.deliver();
    if (auto it = s.async_waits.find(id); it != s.async_waits.end()) s.finish(it, std::nullopt);
  }

  // Waits for the outcome of the queued request `id` (a lock's or a set's): its granted
  // or set_granted event, or nullopt when it timed out or `stop` cancelled it. Waiting
  // threads drive the table's clock: each sleeps until its outcome arrives, it is
  // cancelled, or the table's next timer is due, and then advances the table. Requires
  // `lock` on mu.
  std::optional<table::Event> wait_for(table::RequestId id, const std::stop_token& stop,
                                       std::unique_lock<std::mutex>& lock) {
    SharedTable& s = *shared_;
    while (true) {
      if (auto it = s.outcomes.find(id); it != s.outcomes.end()) {
        table::Event event = std::move(it->second);
        s.outcomes.erase(it);
        if (event.kind == table::Event::Kind::timed_out) return std::nullopt;
        return event;
      }
      if (stop.stop_requested()) {
        s.table.cancel(id, Clock::now());
        s.deliver();
        if (auto it = s.outcomes.find(id); it != s.outcomes.end()) {
          // Granted in the same instant as the cancellation: give it back, so a
          // cancelled wait leaves no trace.
          const table::Event event = std::move(it->second);
          s.outcomes.erase(it);
          const auto now = Clock::now();
          if (event.kind == table::Event::Kind::granted) {
            s.table.release(event.grant.key, event.grant.token, now);
          }
          for (const auto& g : event.grants) s.table.release(g.key, g.token, now);
          s.deliver();
        }
        return std::nullopt;
      }
      auto wake = Clock::now() + std::chrono::seconds(60);
      if (auto next = s.table.next_wakeup()) wake = std::min(wake, *next);
      s.changed.wait_until(lock, stop, wake, [&] { return s.outcomes.count(id) > 0; });
      s.table.advance(Clock::now());
      s.deliver();
    }
  }

  // Requires mu. Records the grant as this engine's own: only the engine that made a
  // grant renews or releases it (another Client on the same table that knows the token
  // is refused), as a backend's owner check would.
  Granted to_granted(const core::LockKey& key, std::chrono::milliseconds ttl,
                     const table::Grant& grant) {
    // Grants that ended without a release (leases that ran out unrenewed) are forgotten
    // now and then, so the record stays as small as what is held.
    if (mine_.size() >= prune_at_) {
      std::erase_if(mine_, [&](const Owned& o) { return !shared_->table.find(o.first, o.second); });
      prune_at_ = std::max(kPruneAbove, 2 * mine_.size());  // amortised: O(1) per grant
    }
    mine_.insert(Owned{key.joined(), grant.token});
    return Granted{GrantRef{key, grant.mode, grant.token, ttl, {}, grant.permits}, grant.expires};
  }

  std::shared_ptr<SharedTable> shared_;
  std::set<Owned> mine_;  // grants this engine made and has not released; guarded by shared_->mu
  std::size_t prune_at_ = kPruneAbove;  // guarded by shared_->mu
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& /*options*/) {
  if (uri.user || uri.password || !uri.path.empty() || !uri.query.empty() || uri.hosts.size() > 1 ||
      (uri.hosts.size() == 1 && uri.hosts[0].port)) {
    throw Error(Errc::invalid_argument, "mem:// takes only a table name: mem://[NAME]");
  }
  const std::string name = uri.hosts.empty() ? "default" : uri.hosts[0].host;
  return std::make_unique<MemEngine>(find_or_create(name));
}

namespace {

std::shared_ptr<SharedTable> find_table(std::string_view table_name) {
  std::lock_guard guard(registry_mu);
  auto it = registry.find(std::string(table_name));
  return it == registry.end() ? nullptr : it->second.lock();
}

}  // namespace

std::optional<std::size_t> queued(std::string_view table_name, std::string_view key) {
  std::shared_ptr<SharedTable> shared = find_table(table_name);
  if (!shared) return std::nullopt;
  std::lock_guard guard(shared->mu);
  return shared->table.inspect(key).waiters.size();
}

bool drop_grants(std::string_view table_name, std::string_view key) {
  std::shared_ptr<SharedTable> shared = find_table(table_name);
  if (!shared) return false;
  std::lock_guard guard(shared->mu);
  const auto now = Clock::now();
  for (const auto& holder : shared->table.inspect(key).holders) {
    shared->table.release(key, holder.token, now);
  }
  shared->deliver();
  return true;
}

}  // namespace warden::engines::mem
