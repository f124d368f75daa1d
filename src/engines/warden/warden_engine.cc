#include "engines/warden/warden_engine.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/stoppable_sleep.h"
#include "engines/resp_client/backoff.h"
#include "engines/resp_client/connector.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/pipeline.h"
#include "engines/resp_client/pool.h"
#include "engines/warden/acquire_call.h"
#include "engines/warden/cell_locator.h"
#include "engines/warden/key_watch.h"
#include "engines/warden/protocol.h"
#include "engines/warden/revoke_listener.h"
#include "engines/warden/wait_channel.h"
#include "engines/warden/warden_config.h"
#include "warden/error.h"

namespace warden::engines::wardend {
namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;
using resp_client::Backoff;
using resp_client::Connector;
using resp_client::Pipeline;
using resp_client::Pool;

class WardenEngine final : public core::Engine {
 public:
  explicit WardenEngine(const WardenConfig& config)
      : config_(config),
        connector_(std::make_shared<Connector>(config.connect, config.retry)),
        pool_(connector_, config.pool_size),
        control_(connector_, config.op_timeout) {}

  ~WardenEngine() override {
    // First: its thread gives grants back through control_.
    if (wait_channel_) wait_channel_->stop();
  }

  // Asks HELLO on the control connection (connecting it).
  void hello() {
    auto result = control_.run({hello_command()});
    proto_ = check_hello(result.replies.at(0), connector_->endpoint());
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.shared = true;
    caps.fair = true;
    caps.non_fair = true;
    caps.lock_delay = true;
    caps.fencing = true;
    caps.durable_tokens = true;  // wardend persists token reservations (docs/protocol.md)
    caps.check = true;
    caps.semaphore = true;                           // ACQUIRE ... PERMITS, protocol 3
    caps.atomic_multi = proto_ >= kProtoAcquireSet;  // ACQUIRESET, protocol 4
    caps.election = proto_ >= kProtoElection;        // VALUE and PROCLAIM, protocol 5
    caps.watch = proto_ >= kProtoWatch;              // WATCH, protocol 6
    caps.cache = proto_ >= kProtoCache;              // REVOKES and CACHE, protocol 7
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    std::optional<RevokeListener::Ticket> ticket;
    if (request.options.cache && proto_ >= kProtoCache) ticket = revoke_listener().ticket();
    const std::optional<std::uint64_t> cache_id =
        ticket ? std::optional(ticket->id) : std::nullopt;
    const auto out = call_acquire(
        [&](Clock::time_point now) { return acquire_command(request, now, cache_id); },
        request.deadline, request.stop, 0, request.capacity > 0);
    if (!out) return std::nullopt;
    const GrantReply& grant = out->grants.front();
    GrantRef ref{request.key,         request.mode, grant.token,
                 request.options.ttl, grant.secret, request.permits};
    if (out->kind == AcquireOutcome::Kind::withdrawn_granted) {
      give_back(ref);
      return std::nullopt;
    }
    Granted granted{std::move(ref), out->sent + grant.waited + request.options.ttl};
    // Its revokes reach us only if the listener it named has stayed up since.
    granted.cacheable = ticket && revoke_listener().current(*ticket);
    return granted;
  }

  // From protocol 8 every asynchronous acquire waits on the one wait channel; an older
  // wardend gets the seam's default (a thread per wait).
  void acquire_async(AcquireRequest request, AcquireDone done) override {
    if (proto_ < kProtoWaits) return Engine::acquire_async(std::move(request), std::move(done));
    wait_channel().acquire(std::move(request), std::move(done));
  }

  bool waits_without_threads() const override { return proto_ >= kProtoWaits; }

  std::optional<std::vector<Granted>> acquire_set(const core::AcquireSetRequest& request) override {
    if (proto_ < kProtoAcquireSet) return Engine::acquire_set(request);  // unsupported
    const auto out =
        call_acquire([&](Clock::time_point now) { return acquire_set_command(request, now); },
                     request.deadline, request.stop, request.members.size(), false);
    if (!out) return std::nullopt;
    std::vector<Granted> granted;
    granted.reserve(request.members.size());
    for (std::size_t i = 0; i < request.members.size(); ++i) {
      const GrantReply& grant = out->grants[i];
      granted.push_back(Granted{GrantRef{request.members[i].key, request.members[i].mode,
                                         grant.token, request.options.ttl, grant.secret, 0},
                                out->sent + grant.waited + request.options.ttl});
    }
    if (out->kind == AcquireOutcome::Kind::withdrawn_granted) {
      for (const Granted& g : granted) give_back(g.grant);
      return std::nullopt;
    }
    return granted;
  }

  std::vector<Renewed> renew(std::span<const GrantRef> grants) override {
    if (grants.empty()) return {};
    std::vector<resp_client::Command> commands;
    commands.reserve(grants.size());
    for (const GrantRef& grant : grants) commands.push_back(renew_command(grant));
    const auto result = control_.run(std::move(commands));
    const std::string context = "RENEW on " + connector_->endpoint();
    std::vector<Renewed> out;
    out.reserve(grants.size());
    for (std::size_t i = 0; i < grants.size(); ++i) {
      // An error reply (e.g. the server could not make a longer hold durable) throws
      // for the whole batch: nothing is declared lost, the core retries next round.
      const bool held = parse_flag(result.replies.at(i), context);
      out.push_back(Renewed{held ? std::optional(result.sent + grants[i].ttl) : std::nullopt});
    }
    return out;
  }

  void release(const GrantRef& grant) override {
    const auto result = control_.run({release_command(grant)});
    // :0 ("was not held") is a release too: release is idempotent.
    parse_flag(result.replies.at(0), "RELEASE on " + connector_->endpoint());
  }

  // The same RELEASE, answered later: the control connection reads its reply.
  void release_async(const GrantRef& grant, ReleaseDone done) override {
    control_.post({release_command(grant)},
                  [this, done = std::move(done)](resp_client::RoundResult& result,
                                                 std::exception_ptr error) {
                    if (!error) {
                      try {
                        parse_flag(result.replies.at(0), "RELEASE on " + connector_->endpoint());
                      } catch (...) {
                        error = std::current_exception();
                      }
                    }
                    done(error);
                  });
  }

  void settle_releases() override { control_.settle(); }

  bool reports_revokes() const override { return true; }

  bool proclaim(const GrantRef& grant, std::string_view value) override {
    const auto result = control_.run({proclaim_command(grant, value)});
    return parse_flag(result.replies.at(0), "PROCLAIM on " + connector_->endpoint());
  }

  bool check(const Sequencer& sequencer) override {
    const auto result = control_.run({check_command(sequencer)});
    return parse_flag(result.replies.at(0), "CHECK on " + connector_->endpoint());
  }

  std::unique_ptr<core::KeyWatch> watch(const core::LockKey& key) override {
    if (proto_ < kProtoWatch) return nullptr;  // an older wardend: the observer polls
    return open_key_watch(*connector_, key, Clock::now() + config_.op_timeout);
  }

  LockStatus inspect(const core::LockKey& key) override {
    return inspect_on(control_, key, connector_->endpoint());
  }

  std::vector<LockSummary> list(std::string_view group) override {
    return list_on(control_, group, connector_->endpoint());
  }

 private:
  // One ACQUIRE or ACQUIRESET (`set_members` > 0) until answered: a connection of its own
  // while it waits, and during the restart embargo (STARTING) a wait asks again later.
  // Returns the outcome when granted (granted, or withdrawn_granted: the caller gives the
  // grants back); nullopt when not granted, withdrawn, or the wait ran out.
  std::optional<AcquireOutcome> call_acquire(
      const std::function<AcquireCommand(Clock::time_point)>& command, Clock::time_point deadline,
      const std::stop_token& stop, std::size_t set_members, bool semaphore) {
    Backoff embargo_backoff(config_.retry);
    Backoff failover_backoff(config_.retry);
    const std::string what = set_members > 0 ? "ACQUIRESET" : "ACQUIRE";
    // A cell's failover is waited out until then: the wait's deadline, a try's op_timeout.
    std::optional<Clock::time_point> failover_until;
    while (true) {
      if (stop.stop_requested()) return std::nullopt;
      const auto now = Clock::now();
      AcquireCall call{
          command(now), deadline, stop, config_.op_timeout, what + " on " + connector_->endpoint(),
          set_members};
      if (!failover_until)
        failover_until = call.command.waits ? deadline : now + config_.op_timeout;

      AcquireOutcome out;
      try {
        // One connection per waiting acquire; a try waits for a free one up to op_timeout.
        auto conn = pool_.take(call.command.waits ? deadline : now + config_.op_timeout, stop);
        if (!conn) {
          if (stop.stop_requested() || call.command.waits) return std::nullopt;
          throw Error(Errc::resource_exhausted,
                      "all " + std::to_string(pool_.max_size()) + " connections to " +
                          connector_->endpoint() +
                          " are busy with waiting acquires; raise ?pool= in the URI");
        }
        out = run(**conn, call, semaphore);
      } catch (const Error& e) {
        // A cell's leader that dies or stops leading closes the connection; the request
        // is asked again of the next leader while the caller's time lasts.
        if (!fails_over(e, *failover_until)) throw;
        const auto retry_at =
            std::min(Clock::now() + failover_backoff.next_delay(), *failover_until);
        if (!core::sleep_until(retry_at, stop)) return std::nullopt;
        continue;
      }
      switch (out.kind) {
        case AcquireOutcome::Kind::granted:
        case AcquireOutcome::Kind::withdrawn_granted:
          return out;
        case AcquireOutcome::Kind::not_granted:
        case AcquireOutcome::Kind::withdrawn:
          return std::nullopt;
        case AcquireOutcome::Kind::starting:
          break;
      }
      // Restart embargo: a try is simply not granted; a wait asks again later.
      if (!call.command.waits) return std::nullopt;
      const auto retry_at = std::min(Clock::now() + embargo_backoff.next_delay(), deadline);
      if (!core::sleep_until(retry_at, stop)) return std::nullopt;
      if (Clock::now() >= deadline) return std::nullopt;
    }
  }

  // Whether a request that failed with `e` is asked again, until `until`: only of a cell
  // (a single wardend that went away is an error at once), only when the connection
  // was lost or the member does not lead. A request lost with its connection may have
  // been granted unseen; asked again, it then waits behind that grant's lease
  // (docs/cell.md).
  bool fails_over(const Error& e, Clock::time_point until) const {
    if (config_.cell.empty() || Clock::now() >= until) return false;
    return e.code() == Errc::unavailable || e.code() == Errc::deadline_exceeded;
  }

  // One call. A semaphore's request to a wardend from before semaphores (protocol 2)
  // meets an unknown option; that is the engine lacking the capability, not a fault.
  AcquireOutcome run(resp_client::Connection& conn, const AcquireCall& call, bool semaphore) {
    try {
      return run_acquire(conn, call);
    } catch (const Error& e) {
      const std::string_view what = e.what();
      if (semaphore && what.find("ACQUIRE option 'PERMITS'") != what.npos) {
        throw Error(Errc::unsupported, "wardend at " + connector_->endpoint() +
                                           " has no semaphores (protocol 3): upgrade it");
      }
      throw;
    }
  }

  // The revoke channel, connected by the first acquire that asks to be cached.
  RevokeListener& revoke_listener() {
    std::call_once(revoke_listener_started_, [this] {
      revoke_listener_ = std::make_unique<RevokeListener>(
          connector_, config_.op_timeout, config_.retry,
          [this](const core::Revoke& revoke) { report_revoke(revoke); });
    });
    return *revoke_listener_;
  }

  // The asynchronous acquires' connection, opened by the first one.
  WaitChannel& wait_channel() {
    std::call_once(wait_channel_started_, [this] {
      wait_channel_ = WaitChannel::start(connector_, config_.op_timeout, config_.retry,
                                         [this](const GrantRef& grant) {
                                           // Without waiting: the channel's thread must not.
                                           release_async(grant, [](std::exception_ptr) {});
                                         });
    });
    return *wait_channel_;
  }

  // Releases a grant that arrived after its acquire was cancelled. If that fails, the
  // grant ends by its TTL (nobody renews it); there is nobody to report the error to.
  void give_back(const GrantRef& grant) {
    try {
      release(grant);
    } catch (const Error&) {
    }
  }

  const WardenConfig config_;
  const std::shared_ptr<Connector> connector_;
  Pool pool_;                    // ACQUIREs: one connection each
  Pipeline control_;             // RENEW, RELEASE, CHECK, HELLO
  std::int64_t proto_ = kProto;  // the server's, from HELLO before any other call
  std::once_flag revoke_listener_started_;
  std::unique_ptr<RevokeListener> revoke_listener_;  // its thread reports to us
  std::once_flag wait_channel_started_;
  std::shared_ptr<WaitChannel> wait_channel_;  // stopped first in the destructor
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  WardenConfig config = parse_config(uri, options);
  if (!config.cell.empty()) config.connect.locator = std::make_shared<CellLocator>(config.cell);
  auto engine = std::make_unique<WardenEngine>(std::move(config));
  engine->hello();
  return engine;
}

}  // namespace warden::engines::wardend
