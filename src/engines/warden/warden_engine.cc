#include "engines/warden/warden_engine.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engines/resp_client/backoff.h"
#include "engines/resp_client/connector.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/pipeline.h"
#include "engines/resp_client/pool.h"
#include "engines/warden/acquire_call.h"
#include "engines/warden/protocol.h"
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

// Sleeps until `until`; false if `stop` was requested first.
bool sleep_until(Clock::time_point until, const std::stop_token& stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_until(lock, stop, until, [] { return false; });
  return !stop.stop_requested();
}

class WardenEngine final : public core::Engine {
 public:
  explicit WardenEngine(const WardenConfig& config)
      : config_(config),
        connector_(std::make_shared<Connector>(config.connect, config.retry)),
        pool_(connector_, config.pool_size),
        control_(connector_, config.op_timeout) {}

  // Asks HELLO on the control connection (connecting it).
  void hello() {
    auto result = control_.run({hello_command()});
    check_hello(result.replies.at(0), connector_->endpoint());
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
    caps.semaphore = true;  // ACQUIRE ... PERMITS, protocol 3
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    Backoff embargo_backoff(config_.retry);
    while (true) {
      if (request.stop.stop_requested()) return std::nullopt;
      const auto now = Clock::now();
      AcquireCall call{acquire_command(request, now), request.deadline, request.stop,
                       config_.op_timeout, "ACQUIRE on " + connector_->endpoint()};

      // One connection per waiting acquire; a try waits for a free one up to op_timeout.
      auto conn = pool_.take(call.command.waits ? request.deadline : now + config_.op_timeout,
                             request.stop);
      if (!conn) {
        if (request.stop.stop_requested() || call.command.waits) return std::nullopt;
        throw Error(Errc::resource_exhausted,
                    "all " + std::to_string(pool_.max_size()) + " connections to " +
                        connector_->endpoint() +
                        " are busy with waiting acquires; raise ?pool= in the URI");
      }
      const AcquireOutcome out = run(**conn, call, request);
      switch (out.kind) {
        case AcquireOutcome::Kind::granted: {
          const Clock::time_point expires = out.sent + out.grant.waited + request.options.ttl;
          return Granted{GrantRef{request.key, request.mode, out.grant.token, request.options.ttl,
                                  out.grant.secret, request.permits},
                         expires};
        }
        case AcquireOutcome::Kind::not_granted:
        case AcquireOutcome::Kind::withdrawn:
          return std::nullopt;
        case AcquireOutcome::Kind::withdrawn_granted:
          give_back(GrantRef{request.key, request.mode, out.grant.token, request.options.ttl,
                             out.grant.secret, request.permits});
          return std::nullopt;
        case AcquireOutcome::Kind::starting:
          break;
      }
      // Restart embargo: a try is simply not granted; a wait asks again later.
      if (!call.command.waits) return std::nullopt;
      conn.reset();
      const auto retry_at = std::min(Clock::now() + embargo_backoff.next_delay(), request.deadline);
      if (!sleep_until(retry_at, request.stop)) return std::nullopt;
      if (Clock::now() >= request.deadline) return std::nullopt;
    }
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

  bool check(const Sequencer& sequencer) override {
    const auto result = control_.run({check_command(sequencer)});
    return parse_flag(result.replies.at(0), "CHECK on " + connector_->endpoint());
  }

  LockStatus inspect(const core::LockKey& key) override {
    return inspect_on(control_, key, connector_->endpoint());
  }

  std::vector<LockSummary> list(std::string_view group) override {
    return list_on(control_, group, connector_->endpoint());
  }

 private:
  // One ACQUIRE. A semaphore's request to a wardend from before semaphores (protocol 2)
  // meets an unknown option; that is the engine lacking the capability, not a fault.
  AcquireOutcome run(resp_client::Connection& conn, const AcquireCall& call,
                     const AcquireRequest& request) {
    try {
      return run_acquire(conn, call);
    } catch (const Error& e) {
      const std::string_view what = e.what();
      if (request.capacity > 0 && what.find("ACQUIRE option 'PERMITS'") != what.npos) {
        throw Error(Errc::unsupported, "wardend at " + connector_->endpoint() +
                                           " has no semaphores (protocol 3): upgrade it");
      }
      throw;
    }
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
  Pool pool_;         // ACQUIREs: one connection each
  Pipeline control_;  // RENEW, RELEASE, CHECK, HELLO
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  auto engine = std::make_unique<WardenEngine>(parse_config(uri, options));
  engine->hello();
  return engine;
}

}  // namespace warden::engines::wardend
