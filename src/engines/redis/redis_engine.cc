#include "engines/redis/redis_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/client_id.h"
#include "core/stoppable_sleep.h"
#include "engines/redis/acquire_plan.h"
#include "engines/redis/async_waits.h"
#include "engines/redis/lock_keys.h"
#include "engines/redis/redis_config.h"
#include "engines/redis/script_call.h"
#include "engines/redis/script_replies.h"
#include "engines/redis/scripts.h"
#include "engines/redis/subscriber.h"
#include "engines/redis/wait_lines.h"
#include "engines/resp_client/backoff.h"
#include "engines/resp_client/cluster_router.h"
#include "engines/resp_client/cluster_slots.h"
#include "engines/resp_client/connector.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/pipeline.h"
#include "warden/error.h"

namespace warden::engines::redis {
namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;
using resp_client::Backoff;
using resp_client::ClusterRouter;
using resp_client::Connector;
using resp_client::Endpoint;
using resp_client::Pipeline;
using resp_client::Reply;

// Grants per renew.lua call: a watchdog round holding more sends several calls, all in
// one pipelined round trip, so no single script runs long enough to stall Redis.
constexpr std::size_t kRenewChunk = 256;

// The slot of a lock's keys (all of them share it: lock_keys.h).
std::uint16_t slot_of(const LockKeys& keys) { return resp_client::key_slot(keys.holders); }

std::unique_ptr<ClusterRouter> cluster_router(const RedisConfig& config) {
  if (config.cluster_seeds.empty()) return nullptr;
  resp_client::ClusterOptions options;
  options.seeds = config.cluster_seeds;
  options.node = config.connect;
  options.pipelines_per_node = config.pool_size;
  options.op_timeout = config.op_timeout;
  options.retry = config.retry;
  return std::make_unique<ClusterRouter>(std::move(options));
}

// The KeyWatch of redis:// (RedisEngine::watch): a subscriber's watch for '~'.
class PublishedChanges final : public core::KeyWatch {
 public:
  explicit PublishedChanges(std::unique_ptr<Subscriber::Watch> watch) : watch_(std::move(watch)) {}
  bool wait(Clock::time_point until, const std::stop_token& stop) override {
    return watch_->wait(until, stop);
  }
  bool broken() const override { return false; }
  bool complete() const override { return false; }

 private:
  std::unique_ptr<Subscriber::Watch> watch_;
};

// Lock caching's watch on redis:// (RedisEngine::watch_requests): a subscriber's watch
// for '?', which a request refused while a caching holder holds publishes (lua/
// lock_base.lua, caches). A '?' published while the subscription is not in place is not
// heard, so the watch looks at the lock instead (a waiter still queued asks; a try that
// has already gone no longer does): when the subscription is confirmed, and every
// kRecheck while it is not (its connection is down, or Redis refuses it). In a cluster,
// a slot that moved leaves the watch on a node that hears nothing more: the watch then
// says it is broken, and is made again on the slot's new master.
class RequestsOfOthers final : public core::KeyWatch {
 public:
  RequestsOfOthers(std::unique_ptr<Subscriber::Watch> watch, std::function<bool()> someone_waits,
                   std::function<bool()> moved)
      : watch_(std::move(watch)),
        someone_waits_(std::move(someone_waits)),
        moved_(std::move(moved)) {}

  // Throws Error when the lock cannot be looked at (the caller opens another watch).
  bool wait(Clock::time_point until, const std::stop_token& stop) override {
    while (!stop.stop_requested()) {
      const bool unheard = !watch_->subscribed();
      const auto slice = moved_ || unheard ? std::min(until, Clock::now() + kRecheck) : until;
      switch (watch_->wait_why(slice, stop)) {
        case Subscriber::Watch::Woken::by_message:
          return true;
        case Subscriber::Watch::Woken::to_look:
          if (someone_waits_()) return true;
          break;
        case Subscriber::Watch::Woken::no:
          if (unheard && !stop.stop_requested() && someone_waits_()) return true;
          break;
      }
      if (moved_ && moved_()) {
        broken_ = true;
        return false;
      }
      if (Clock::now() >= until) return false;
    }
    return false;
  }
  bool broken() const override { return broken_; }

 private:
  // How often a watch that cannot hear looks at its lock, and a cluster's watch checks
  // that its slot is still on the node it listens to.
  static constexpr auto kRecheck = std::chrono::seconds(1);

  std::unique_ptr<Subscriber::Watch> watch_;
  const std::function<bool()> someone_waits_;
  const std::function<bool()> moved_;  // empty off a cluster
  bool broken_ = false;
};

class RedisEngine final : public core::Engine {
 public:
  explicit RedisEngine(RedisConfig config)
      : config_(std::move(config)),
        router_(cluster_router(config_)),
        connector_(router_ ? nullptr : std::make_shared<Connector>(config_.connect, config_.retry)),
        wait_lines_(
            connector_ && config_.wait_lines > 0
                ? std::make_unique<WaitLines>(connector_, config_.wait_lines, config_.op_timeout)
                : nullptr),
        client_id_(core::random_client_id()),
        wait_(config_.min_replicas == 0
                  ? resp_client::Command{}
                  : resp_client::Command{"WAIT", std::to_string(config_.min_replicas),
                                         std::to_string(config_.replica_timeout.count())}) {
    for (std::size_t i = 0; connector_ && i < config_.pool_size; ++i) {
      pipelines_.push_back(std::make_unique<Pipeline>(connector_, config_.op_timeout));
    }
    if (config_.master) {
      config_.master->watch([this] { recheck_after_failover(); });
    }
  }

  ~RedisEngine() override {
    // Its waits are told first; nothing of it runs afterwards (it may outlive this).
    if (async_waits_) async_waits_->stop();
    // Completions of releases still owed touch held_, which goes before the pipelines.
    settle_releases();
    // The listener uses this engine's pipelines: no failover is handled past this point.
    if (config_.master) config_.master->stop_watching();
  }

  // Connects the first pipelined connection (AUTH, SELECT) and asks PING; in a cluster,
  // reads the slot map.
  void ping() {
    if (router_) {
      router_->refresh();
      return;
    }
    const auto result = pipelines_.front()->run({{"PING"}});
    const Reply& reply = result.replies.at(0);
    if (reply.is_error()) throw resp_client::reply_error(reply, context("PING"));
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.shared = true;
    caps.fair = true;
    caps.non_fair = true;
    caps.lock_delay = true;
    caps.fencing = true;
    // Tokens are floored at Redis' microsecond clock, so they keep increasing after a
    // restart that lost the data (docs/engines/redis.md states the clock assumption).
    caps.durable_tokens = true;
    caps.check = true;
    caps.semaphore = true;  // shared grants that count permits (lua/lock.lua)
    caps.election = true;   // a campaign's value is the grant's 'v' (lua/lock_base.lua)
    caps.cache = true;      // revokes by a '?' on the lock's channel (RequestsOfOthers)
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    const LockKeys keys = LockKeys::of(request.key);
    const AcquirePlan plan = plan_of(request);
    const std::string& owner = plan.owner;
    const std::string& entry = plan.entry;
    const bool waits = plan.waits;
    const ScriptCall call = plan.attempt(request, keys);

    std::unique_ptr<Subscriber::Watch> watch;
    Endpoint watched_node;
    // A waiter's own connection (wait_lines.h), when one can be had: the waiting is then
    // done inside the next attempt (`blocked`), until `until`.
    std::unique_ptr<WaitLines::Line> line;
    const LineReturn line_return{wait_lines_.get(), line};
    bool blocked = false;
    Clock::time_point until;
    Backoff poll(config_.poll);
    while (true) {
      Clock::time_point sent;
      Attempt attempt;
      std::optional<std::int64_t> acknowledged;  // replicas, with min_replicas
      try {
        auto result = blocked
                          ? wait_then_run(*line, keys.wake_list(entry), until, call, request.stop)
                          : run_scripts(runner(), {call}, wait_command());
        sent = result.sent;
        attempt = attempt_of(result.replies.at(0), context("acquire"));
        if (wait_command() != nullptr) acknowledged = replicas_of(result.replies.back());
      } catch (const Error& e) {
        const bool transient = e.code() == Errc::unavailable || e.code() == Errc::deadline_exceeded;
        // A wait that was cancelled, or whose deadline passed, ends here as what it is,
        // never with another round: Redis is in trouble (frozen, cut off, slow to shake
        // hands), a withdraw would cost up to op_timeout more, and the waiter's entry
        // lapses by its own TTL (waiter_ttl) as a vanished waiter's does.
        if (transient &&
            (request.stop.stop_requested() || (waits && Clock::now() >= request.deadline))) {
          return std::nullopt;
        }
        // Redis did not answer in time: it would not answer a withdraw either, and every
        // further round would cost op_timeout more.
        const bool silent = e.code() == Errc::deadline_exceeded;
        // The script may have run (and granted, or queued us) with only its reply lost.
        if (!silent) withdraw(plan.withdraw(keys));
        if (blocked) {
          // The waiter's own line failed (closed by Redis, say): not used again. The
          // waiter asks again at once on the shared pipeline, at the queue's tail, and
          // that attempt says whether Redis itself can be reached.
          line.reset();
          blocked = false;
          if (request.stop.stop_requested()) return std::nullopt;
          if (transient && !silent) continue;
        }
        // Behind Sentinel a master that is gone is replaced within seconds: a waiter
        // asks again (queueing again at the new master) until its own deadline, as long
        // as a silent attempt still ends by it.
        if (!follows_failover() || !waits || !transient) throw;
        if (silent && Clock::now() + config_.op_timeout > request.deadline) throw;
        if (!pause_before_retry(request, poll.next_delay())) return std::nullopt;
        continue;
      }
      // Stopped while blocked: the attempt behind the wait ran anyway, and whatever it did
      // (a grant too) is taken back.
      if (blocked && request.stop.stop_requested()) {
        withdraw(plan.withdraw(keys));
        return std::nullopt;
      }
      if (attempt.granted && acknowledged && *acknowledged < config_.min_replicas) {
        // A grant a failover could lose: given back, and the acquire fails (or asks
        // again within its wait, as replicas may catch up).
        release_quietly(keys, attempt.token, owner);
        const Error why = too_few_replicas(context("acquire"), *acknowledged, config_.min_replicas,
                                           config_.replica_timeout);
        if (!waits) throw why;
        blocked = false;
        if (!pause_before_retry(request, poll.next_delay())) throw why;
        continue;
      }
      if (attempt.granted) {
        GrantRef grant{request.key,         request.mode, attempt.token,
                       request.options.ttl, owner,        request.permits};
        if (config_.master) {
          std::lock_guard lock(held_mu_);
          held_.emplace(owner, grant);
        }
        return Granted{std::move(grant), sent + request.options.ttl};
      }
      if (!waits) return std::nullopt;
      if (blocked && Clock::now() >= request.deadline) {
        withdraw(plan.withdraw(keys));
        return std::nullopt;
      }
      const auto now = Clock::now();
      until = std::min(request.deadline, now + poll.next_delay());
      if (attempt.retry_ms >= 0) {
        until = std::min(until, now + std::chrono::milliseconds(attempt.retry_ms + 1));
      }
      if (!line && wait_lines_) line = wait_lines_->take();
      blocked = line != nullptr;
      if (blocked) {
        // A grant from behind the wait counts its lease from when the wait was sent (no
        // later than the script ran): so the wait is kept short beside the lease, which
        // then looks at most a tenth shorter here than it is on Redis.
        until = std::min(until, now + request.options.ttl / 10);
        continue;  // the next attempt waits first
      }
      // Subscribing only now keeps the uncontended path at one round trip; a message
      // published before the subscription took effect is made up for by the wake-up
      // that confirms it (the waiter looks once more).
      // In a cluster the channel lives on the lock's master: a watch made on another
      // node (before the slot moved) hears nothing more and is made again.
      try {
        const Endpoint node = node_of(keys);
        if (!watch || node != watched_node) {
          watch.reset();
          watch = subscriber(node).watch(keys.channel, entry);
          watched_node = node;
        }
      } catch (const Error&) {
        watch.reset();  // no master for the slot now: polling alone, until there is one
      }
      if (watch) {
        watch->wait(until, request.stop);
      } else {
        pause_before_retry(request, until - Clock::now());
      }
      if (request.stop.stop_requested() || Clock::now() >= request.deadline) {
        withdraw(plan.withdraw(keys));
        return std::nullopt;
      }
    }
  }

  // One server's (or Sentinel's master's) waits are driven by one thread (async_waits.h),
  // with min_replicas too (a WAIT behind each grant). A cluster's router keeps the
  // default: the blocking acquire on a thread of its own.
  void acquire_async(AcquireRequest request, AcquireDone done) override {
    if (!waits_without_threads()) {
      Engine::acquire_async(std::move(request), std::move(done));
      return;
    }
    AcquirePlan plan = plan_of(request);
    async_waits().acquire(std::move(request), std::move(plan), subscriber_of(Endpoint{}),
                          std::move(done));
  }
  bool waits_without_threads() const override { return !router_; }

  std::vector<Renewed> renew(std::span<const GrantRef> grants) override {
    if (grants.empty()) return {};
    if (router_) return renew_on_cluster(grants);
    std::vector<ScriptCall> calls;
    for (std::size_t first = 0; first < grants.size(); first += kRenewChunk) {
      ScriptCall call{&k_renew_script, {}, {}};
      const std::size_t last = std::min(grants.size(), first + kRenewChunk);
      for (std::size_t i = first; i < last; ++i) {
        const GrantRef& grant = grants[i];
        LockKeys keys = LockKeys::of(grant.key);
        call.keys.push_back(std::move(keys.holders));
        call.keys.push_back(std::move(keys.info));
        call.args.push_back(std::to_string(grant.token));
        call.args.push_back(grant.owner);
        call.args.push_back(std::to_string(grant.ttl.count()));
      }
      calls.push_back(std::move(call));
    }
    const auto result = run_scripts(runner(), calls, wait_command());
    const std::string what = context("renew");
    // Renewed on the master but not on enough replicas: neither kept nor lost; the old
    // expiries stand and the core asks again soon.
    if (wait_command() != nullptr && replicas_of(result.replies.back()) < config_.min_replicas) {
      return std::vector<Renewed>(grants.size(), Renewed::unknown());
    }
    std::vector<Renewed> out;
    out.reserve(grants.size());
    for (std::size_t c = 0; c < calls.size(); ++c) {
      const Reply& reply = result.replies.at(c);
      // An error reply fails the whole batch: nothing is declared lost, the core
      // retries next round.
      if (reply.is_error()) throw resp_client::reply_error(reply, what);
      const std::size_t count = std::min(kRenewChunk, grants.size() - c * kRenewChunk);
      if (!reply.is_array() || reply.elements.size() != count) {
        throw resp_client::unexpected_reply(reply, what);
      }
      for (std::size_t n = 0; n < count; ++n) {
        const GrantRef& grant = grants[c * kRenewChunk + n];
        const bool held = integer_of(reply.elements[n], what) == 1;
        if (!held && config_.master) {
          std::lock_guard lock(held_mu_);
          held_.erase(grant.owner);
        }
        out.push_back(Renewed{held ? std::optional(result.sent + grant.ttl) : std::nullopt});
      }
    }
    return out;
  }

  void release(const GrantRef& grant) override {
    const LockKeys keys = LockKeys::of(grant.key);
    const auto result =
        run_scripts(runner(),
                    {ScriptCall{&k_release_script,
                                keys.all(),
                                {keys.channel, std::to_string(grant.token), grant.owner}}},
                    wait_command());
    // 0 ("was not held") is a release too: release is idempotent.
    integer_of(result.replies.at(0), context("release"));
    forget_held(grant.owner);
  }

  // The same call, answered later: its reply (and WAIT's) is read by the pipeline. A
  // server that lost the script (NOSCRIPT, after a restart or a failover) gets it again
  // in full from the completion, in the pipeline's next round.
  void release_async(const GrantRef& grant, ReleaseDone done) override {
    // A cluster's router sends each round and waits for it: nothing to gain there.
    if (router_) {
      Engine::release_async(grant, std::move(done));
      return;
    }
    const LockKeys keys = LockKeys::of(grant.key);
    post_release(pipeline(),
                 ScriptCall{&k_release_script,
                            keys.all(),
                            {keys.channel, std::to_string(grant.token), grant.owner}},
                 grant.owner, std::make_shared<ReleaseDone>(std::move(done)), true);
  }

  void settle_releases() override {
    if (router_) router_->settle();
    for (const auto& pipeline : pipelines_) pipeline->settle();
  }

  // One script call on the lock's :i (its slot's master in a cluster), followed by
  // WAIT under min_replicas as a release is.
  bool proclaim(const GrantRef& grant, std::string_view value) override {
    const LockKeys keys = LockKeys::of(grant.key);
    const auto result = run_scripts(
        runner(),
        {ScriptCall{&k_proclaim_script,
                    {keys.info},
                    {std::to_string(grant.token), grant.owner, std::string(value), keys.channel}}},
        wait_command());
    return integer_of(result.replies.at(0), context("proclaim")) == 1;
  }

  // Election::observe's watch: the lock's channel, on which a grant, release or
  // proclaim of a leader with a value publishes '~' (lua/lock.lua, announce). A lease
  // that runs out publishes nothing, so the watch is not complete: the observer also
  // polls. The subscriber reconnects by itself and wakes its watches when it has.
  std::unique_ptr<core::KeyWatch> watch(const core::LockKey& key) override {
    const LockKeys keys = LockKeys::of(key);
    return std::make_unique<PublishedChanges>(subscriber(node_of(keys)).watch(keys.channel, "~"));
  }

  // Lock caching's revokes (core/watch_revokes.h): see RequestsOfOthers.
  std::unique_ptr<core::KeyWatch> watch_requests(const core::LockKey& key) override {
    const LockKeys keys = LockKeys::of(key);
    const Endpoint node = node_of(keys);
    std::function<bool()> moved;
    if (router_) {
      moved = [this, keys, node] {
        try {
          return node_of(keys) != node;
        } catch (const Error&) {
          return true;  // no master for the slot now: made again once there is one
        }
      };
    }
    return std::make_unique<RequestsOfOthers>(
        subscriber(node).watch(keys.channel, "?"),
        [this, key] { return !inspect(key).waiters.empty(); }, std::move(moved));
  }

  bool check(const Sequencer& sequencer) override {
    const LockKeys keys = LockKeys::of(sequencer.group, sequencer.name);
    const auto result =
        run_scripts(runner(), {ScriptCall{&k_check_script,
                                          {keys.holders, keys.info},
                                          {std::to_string(sequencer.token),
                                           sequencer.mode == Mode::exclusive ? "x" : "s"}}});
    return integer_of(result.replies.at(0), context("check")) == 1;
  }

  LockStatus inspect(const core::LockKey& key) override {
    if (!router_) return inspect_on(pipeline(), key, connector_->endpoint());
    const std::uint16_t slot = slot_of(LockKeys::of(key));
    // A read that met the slot moving is read again once from the map as it is now.
    for (int attempt = 1;; ++attempt) {
      const Endpoint node = node_of_slot(slot);
      try {
        return inspect_on(router_->pipeline(node), key, node.to_string());
      } catch (const Error&) {
        if (attempt == 2) throw;
        router_->refresh();
      }
    }
  }

  std::vector<LockSummary> list(std::string_view group) override {
    if (!router_) return list_on(pipeline(), group, connector_->endpoint());
    // Every master holds its own slots' locks.
    std::vector<LockSummary> out;
    for (const Endpoint& node : router_->masters()) {
      auto part = list_on(router_->pipeline(node), group, node.to_string());
      out.insert(out.end(), std::make_move_iterator(part.begin()),
                 std::make_move_iterator(part.end()));
    }
    std::sort(out.begin(), out.end(),
              [](const LockSummary& a, const LockSummary& b) { return a.name < b.name; });
    return out;
  }

 private:
  // One release script call on `target` (by its SHA-1 first), answered to `done` later.
  // Sent again in full on the same pipeline: a completion may post only to its own.
  void post_release(Pipeline& target, ScriptCall call, std::string owner,
                    std::shared_ptr<ReleaseDone> done, bool by_sha) {
    std::vector<resp_client::Command> commands{resp_client::script_command(call, by_sha)};
    if (wait_command() != nullptr) commands.push_back(*wait_command());
    target.post(std::move(commands),
                [this, &target, call = std::move(call), owner = std::move(owner), done, by_sha](
                    resp_client::RoundResult& result, std::exception_ptr error) mutable {
                  if (!error && by_sha && result.replies.at(0).error_code() == "NOSCRIPT") {
                    post_release(target, std::move(call), std::move(owner), std::move(done), false);
                    return;
                  }
                  if (!error) {
                    try {
                      integer_of(result.replies.at(0), context("release"));
                      forget_held(owner);
                    } catch (...) {
                      error = std::current_exception();
                    }
                  }
                  (*done)(error);
                });
  }

  // What an acquire of `request` sends (both paths): its attempt, its withdraw, and the
  // names its wake-ups and grant carry.
  AcquirePlan plan_of(const AcquireRequest& request) {
    // A grant its client may cache is marked for the scripts (lua/lock_base.lua, caches).
    return AcquirePlan::of(
        request,
        client_id_ + '-' + std::to_string(++sequence_) + (request.options.cache ? "*" : ""),
        config_.waiter_ttl);
  }

  AsyncWaits& async_waits() {
    std::call_once(async_waits_started_, [this] {
      AsyncWaits::Setup setup;
      setup.connector = connector_;
      setup.op_timeout = config_.op_timeout;
      setup.poll = config_.poll;
      setup.follows_failover = follows_failover();
      setup.replicas_wait = wait_;
      setup.min_replicas = config_.min_replicas;
      setup.replica_timeout = config_.replica_timeout;
      if (config_.master) {
        setup.granted = [this](const GrantRef& grant) {
          std::lock_guard lock(held_mu_);
          held_.emplace(grant.owner, grant);
        };
      }
      async_waits_ = AsyncWaits::start(std::move(setup));
    });
    return *async_waits_;
  }

  // Hands a waiter's line back to the pool when acquire() returns or throws.
  struct LineReturn {
    WaitLines* lines;
    std::unique_ptr<WaitLines::Line>& line;
    ~LineReturn() {
      if (lines != nullptr && line) lines->give_back(std::move(line));
    }
  };

  // One attempt after waiting on the waiter's own line (wait_lines.h). A script Redis
  // does not know (after a restart) is run again, loaded, by run_scripts.
  resp_client::RoundResult wait_then_run(WaitLines::Line& line, const std::string& wake_list,
                                         Clock::time_point until, const ScriptCall& call,
                                         const std::stop_token& stop) {
    auto result =
        wait_lines_->wait_then_run(line, wake_list, until, call, wait_command(), runner(), stop);
    if (result.replies.at(0).error_code() != "NOSCRIPT") return result;
    return run_scripts(runner(), {call}, wait_command());
  }

  // A released grant no longer needs checking after a failover.
  void forget_held(const std::string& owner) {
    if (!config_.master) return;
    std::lock_guard lock(held_mu_);
    held_.erase(owner);
  }

  // Where script calls go: a pipeline to the one server, or the cluster's router.
  resp_client::Runner& runner() {
    if (router_) return *router_;
    return pipeline();
  }

  // A failed call may be a master that is being replaced (Sentinel, a cluster's
  // replica promotion): waiters ask again within their wait.
  bool follows_failover() const { return config_.master || router_; }

  // The master holding `keys` now (in a cluster); the one server's empty Endpoint
  // otherwise. Throws Error(unavailable) when no master serves the lock's slot.
  Endpoint node_of(const LockKeys& keys) {
    return router_ ? node_of_slot(slot_of(keys)) : Endpoint{};
  }
  Endpoint node_of_slot(std::uint16_t slot) {
    auto node = router_->master_of(slot);
    if (!node) {
      throw Error(Errc::unavailable,
                  context("lookup") + ": no master serves slot " + std::to_string(slot));
    }
    return *node;
  }

  // The subscriber of the node at `endpoint` (the one server's for the empty Endpoint),
  // made when first needed.
  Subscriber& subscriber(const Endpoint& endpoint) { return *subscriber_of(endpoint); }
  // Shared with the asynchronous waits that watch on it, which may outlive the engine.
  std::shared_ptr<Subscriber> subscriber_of(const Endpoint& endpoint) {
    std::lock_guard lock(subscribers_mu_);
    auto& slot = subscribers_[endpoint];
    if (!slot) {
      slot = router_
                 ? std::make_shared<Subscriber>(router_->node_options(endpoint), config_.retry,
                                                router_->tls())
                 : std::make_shared<Subscriber>(config_.connect, config_.retry, connector_->tls());
    }
    return slot;
  }

  // A cluster refuses a script whose keys span slots, so each grant is renewed by a
  // call of its own; the calls to one master travel in one round, and the masters are
  // asked at once, so one that is down (or frozen) holds up nobody else's renewals: its
  // grants' renewals are undecided, to be asked again soon, as with a failed batch.
  std::vector<Renewed> renew_on_cluster(std::span<const GrantRef> grants) {
    std::vector<Renewed> out(grants.size(), Renewed::unknown());
    std::map<Endpoint, std::vector<std::size_t>> by_node;
    for (std::size_t i = 0; i < grants.size(); ++i) {
      if (auto node = router_->master_of(slot_of(LockKeys::of(grants[i].key)))) {
        by_node[*node].push_back(i);
      }
    }
    const auto renew_node = [&](const std::vector<std::size_t>& members) {
      std::vector<ScriptCall> calls;
      calls.reserve(members.size());
      for (std::size_t i : members) {
        const GrantRef& grant = grants[i];
        LockKeys keys = LockKeys::of(grant.key);
        calls.push_back(ScriptCall{
            &k_renew_script,
            {std::move(keys.holders), std::move(keys.info)},
            {std::to_string(grant.token), grant.owner, std::to_string(grant.ttl.count())}});
      }
      try {
        const auto result = run_scripts(*router_, calls);
        for (std::size_t n = 0; n < members.size(); ++n) {
          const Reply& reply = result.replies.at(n);
          if (!reply.is_array() || reply.elements.size() != 1 || !reply.elements[0].is_integer()) {
            continue;  // an error reply: undecided
          }
          const GrantRef& grant = grants[members[n]];
          out[members[n]] = reply.elements[0].integer == 1 ? Renewed::until(result.sent + grant.ttl)
                                                           : Renewed::lost();
        }
      } catch (const Error&) {
        // The master cannot be reached now: undecided.
      }
    };
    if (by_node.size() == 1) {
      renew_node(by_node.begin()->second);
      return out;
    }
    std::vector<std::future<void>> running;
    for (const auto& [node, members] : by_node) {
      running.push_back(std::async(std::launch::async, renew_node, std::cref(members)));
    }
    for (auto& r : running) r.get();
    return out;
  }

  Pipeline& pipeline() {
    const std::size_t n = next_pipeline_.fetch_add(1, std::memory_order_relaxed);
    return *pipelines_[n % pipelines_.size()];
  }

  std::string context(std::string_view what) const {
    return std::string(what) + " on " + (router_ ? router_->description() : connector_->endpoint());
  }

  // WAIT min_replicas replica_timeout, to follow writes; nullptr without min_replicas.
  const resp_client::Command* wait_command() const { return wait_.empty() ? nullptr : &wait_; }

  // The number of replicas a WAIT reply counts; 0 for anything else (an error reply).
  static std::int64_t replicas_of(const Reply& reply) {
    return reply.is_integer() ? reply.integer : 0;
  }

  // Gives a grant back, confirmed or not (it lapses by its TTL otherwise).
  void release_quietly(const LockKeys& keys, std::uint64_t token, const std::string& owner) {
    try {
      run_scripts(runner(), {ScriptCall{&k_release_script,
                                        keys.all(),
                                        {keys.channel, std::to_string(token), owner}}});
    } catch (const Error&) {
    }
  }

  // Waits `delay` (less if the deadline comes first, or a stop); false if the waiter
  // should give up: stopped, or its deadline passed.
  static bool pause_before_retry(const AcquireRequest& request, Clock::duration delay) {
    return core::sleep_until(std::min(request.deadline, Clock::now() + delay), request.stop) &&
           Clock::now() < request.deadline;
  }

  // The sentinels moved the master. Replication is asynchronous, so a grant made just
  // before the switch may be missing on the new master, where someone else can now take
  // the lock: every grant this client holds is checked there at once, not at its next
  // renewal, and one that is missing is reported lost now. (Waiters need nothing: their
  // next attempt queues them at the new master.)
  void recheck_after_failover() {
    std::vector<GrantRef> grants;
    {
      std::lock_guard lock(held_mu_);
      for (const auto& [owner, grant] : held_) grants.push_back(grant);
    }
    if (grants.empty()) return;
    std::vector<ScriptCall> calls;
    for (const GrantRef& grant : grants) {
      const LockKeys keys = LockKeys::of(grant.key);
      calls.push_back(
          ScriptCall{&k_check_script,
                     {keys.holders, keys.info},
                     {std::to_string(grant.token), grant.mode == Mode::exclusive ? "x" : "s"}});
    }
    try {
      const auto result = run_scripts(runner(), calls);
      for (std::size_t i = 0; i < grants.size(); ++i) {
        const Reply& reply = result.replies.at(i);
        if (!reply.is_integer() || reply.integer != 0) continue;  // held, or undecided
        {
          std::lock_guard lock(held_mu_);
          held_.erase(grants[i].owner);
        }
        report_lost(grants[i]);
      }
    } catch (const Error&) {
      // The new master cannot be asked yet: the watchdog's renewals decide, as always.
    }
  }

  // Takes a waiter's entry (and a grant made for it) off the lock. If Redis cannot be
  // reached, the entry lapses by its liveness and a grant by its ttl, since nobody
  // refreshes or renews them.
  void withdraw(const ScriptCall& call) {
    try {
      run_scripts(runner(), {call});
    } catch (const Error&) {
    }
  }

  const RedisConfig config_;
  // redis+cluster://: the router to every master; null otherwise.
  const std::unique_ptr<ClusterRouter> router_;
  // One server (or Sentinel's master): its connector and pipelines; null and empty in a
  // cluster.
  const std::shared_ptr<Connector> connector_;
  std::vector<std::unique_ptr<Pipeline>> pipelines_;
  std::atomic<std::size_t> next_pipeline_{0};
  // Waiters' own connections (the URI's wait_lines); null with wait_lines=0 and in a
  // cluster, where a waiter waits on its lock's master's subscriber.
  const std::unique_ptr<WaitLines> wait_lines_;
  std::mutex subscribers_mu_;
  // Per master in a cluster; the one server's under the empty Endpoint otherwise.
  std::map<Endpoint, std::shared_ptr<Subscriber>> subscribers_;  // guarded by subscribers_mu_
  const std::string client_id_;
  std::atomic<std::uint64_t> sequence_{0};
  const resp_client::Command wait_;  // empty without min_replicas
  // Behind Sentinel: the grants this client holds, by owner, for the check after a
  // failover.
  std::mutex held_mu_;
  std::map<std::string, GrantRef> held_;  // guarded by held_mu_
  std::once_flag async_waits_started_;
  std::shared_ptr<AsyncWaits> async_waits_;  // stopped first in the destructor
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  RedisConfig config = parse_config(uri, options);
  if (config.sentinel) {
    config.master = std::make_shared<resp_client::MasterLocator>(*config.sentinel, config.retry);
    config.connect.locator = config.master;
  }
  auto engine = std::make_unique<RedisEngine>(std::move(config));
  engine->ping();
  return engine;
}

}  // namespace warden::engines::redis
