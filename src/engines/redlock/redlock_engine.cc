#include "engines/redlock/redlock_engine.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/client_id.h"
#include "engines/redlock/async_retries.h"
#include "engines/redlock/lock_keys.h"
#include "engines/redlock/masters.h"
#include "engines/redlock/quorum.h"
#include "engines/redlock/redlock_config.h"
#include "engines/redlock/redlock_inspect.h"
#include "engines/redlock/script_replies.h"
#include "engines/resp_client/errors.h"
#include "engines/resp_client/script.h"
#include "warden/error.h"

namespace warden::engines::redlock {

extern const resp_client::Script k_acquire_script;
extern const resp_client::Script k_acquire_alone_script;
extern const resp_client::Script k_fence_script;
extern const resp_client::Script k_withdraw_script;
extern const resp_client::Script k_renew_script;
extern const resp_client::Script k_check_script;

namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;
using resp_client::Leg;
using resp_client::Reply;
using resp_client::ScriptCall;
using std::chrono::milliseconds;

// Leases per renew.lua call: a watchdog round holding more sends several calls, all in
// one round, so no single script runs long enough to stall a master.
constexpr std::size_t kRenewChunk = 256;

// A grant's identity in GrantRef::owner: "OWNER|MASK", the value its key holds and, in
// hex, the masters that may hold it (those that voted yes, and those whose answer was
// not waited for or lost). Release withdraws on those only: the others refused the vote,
// so they never had the key.
std::string grant_identity(const std::string& owner, std::uint32_t may_hold) {
  char mask[9];
  std::snprintf(mask, sizeof(mask), "%x", may_hold);
  return owner + '|' + mask;
}

struct GrantIdentity {
  std::string owner;
  std::uint32_t may_hold = ~0u;  // all, if the identity carries no mask
};

GrantIdentity parse_identity(const std::string& identity) {
  const auto bar = identity.rfind('|');
  if (bar == std::string::npos) return GrantIdentity{identity};
  GrantIdentity parsed{identity.substr(0, bar)};
  const std::string mask = identity.substr(bar + 1);
  std::from_chars(mask.data(), mask.data() + mask.size(), parsed.may_hold, 16);
  return parsed;
}

// What one attempt to acquire came to.
struct Attempt {
  std::optional<Granted> granted;
  AcquireVerdict verdict = AcquireVerdict::unreachable;
  std::string problem;  // why masters failed, for an error message
};

class RedlockEngine final : public core::Engine {
 public:
  explicit RedlockEngine(RedlockConfig config)
      : config_(std::move(config)),
        masters_(config_),
        client_id_(core::random_client_id()),
        random_(std::random_device{}()) {}

  ~RedlockEngine() override { retries_->stop(); }  // its attempts use this engine

  // PINGs every master: a quorum must answer; a refused password fails at once.
  void connect() {
    const auto legs = masters_.ping(config_.node_timeout);
    std::size_t answered = 0;
    for (std::size_t i = 0; i < legs.size(); ++i) {
      const Leg& leg = legs[i];
      if (leg.error && leg.error->code() == Errc::permission_denied) throw *leg.error;
      if (!leg.ok()) continue;
      if (!leg.replies[0].is_error()) {
        ++answered;
        continue;
      }
      // NOAUTH (no password given) or NOPERM: asking again cannot help.
      Error error = resp_client::reply_error(leg.replies[0], "PING on " + masters_.endpoint(i));
      if (error.code() == Errc::permission_denied) throw error;
    }
    if (answered < quorum(masters_.size())) {
      throw Error(Errc::unavailable, config_.label + ": " + too_few(answered, legs));
    }
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.shared = false;
    caps.fair = false;
    caps.non_fair = true;
    caps.lock_delay = false;
    caps.fencing = true;
    // A quorum keeps each lock's last token, and tokens are floored at the masters'
    // microsecond clocks (docs/engines/redlock.md states both assumptions).
    caps.durable_tokens = true;
    caps.check = true;
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    const LockKeys keys = config_.naming.of(request.key.group, request.key.name);
    Retrying retrying{request.deadline > Clock::now()};
    while (true) {
      AsyncRetries::Step step = attempt_once(request, keys, retrying);
      if (step.granted || !step.again) return std::move(step.granted);
      pause_until(*step.again, request.stop);
      if (request.stop.stop_requested()) return std::nullopt;
      if (retrying.waits && Clock::now() >= request.deadline) {
        if (step.at_deadline) std::rethrow_exception(step.at_deadline);
        return std::nullopt;
      }
    }
  }

  // The same attempts on the Client's one retries thread (async_retries.h), without a
  // thread per wait.
  void acquire_async(AcquireRequest request, AcquireDone done) override {
    std::optional<LockKeys> keys;
    try {
      keys = config_.naming.of(request.key.group, request.key.name);
    } catch (...) {
      done(std::nullopt, std::current_exception());
      return;
    }
    auto retrying = std::make_shared<Retrying>(Retrying{request.deadline > Clock::now()});
    retries_->acquire(
        std::move(request),
        [this, keys = std::move(*keys), retrying](const AcquireRequest& asked) {
          return attempt_once(asked, keys, *retrying);
        },
        std::move(done));
  }
  bool waits_without_threads() const override { return true; }

  std::vector<Renewed> renew(std::span<const GrantRef> grants) override {
    if (grants.empty()) return {};
    milliseconds shortest = grants.front().ttl;
    std::vector<ScriptCall> calls;
    for (std::size_t first = 0; first < grants.size(); first += kRenewChunk) {
      ScriptCall call{&k_renew_script, {}, {}};
      for (std::size_t i = first; i < std::min(grants.size(), first + kRenewChunk); ++i) {
        const GrantRef& grant = grants[i];
        shortest = std::min(shortest, grant.ttl);
        LockKeys keys = config_.naming.of(grant.key.group, grant.key.name);
        call.keys.push_back(std::move(keys.lock));
        call.keys.push_back(std::move(keys.fence));
        call.args.push_back(parse_identity(grant.owner).owner);
        call.args.push_back(std::to_string(grant.ttl.count()));
      }
      calls.push_back(std::move(call));
    }
    const std::size_t n = masters_.size();
    // Done early once every lease is decided: renewed by a quorum, or refused by so
    // many masters that no quorum can agree.
    const auto decided = [&](std::span<const Leg> so_far) {
      for (const Tally& tally : renew_tallies(so_far, grants.size())) {
        if (judge_renew(tally, n) == RenewVerdict::undecided) return false;
      }
      return true;
    };
    const auto start = Clock::now();
    const auto legs = masters_.run(std::vector<std::vector<ScriptCall>>(n, calls),
                                   round_timeout(config_.node_timeout, shortest), decided);
    const auto elapsed = Clock::now() - start;
    const std::vector<Tally> tallies = renew_tallies(legs, grants.size());
    std::size_t answered = 0;
    for (const Leg& leg : legs) answered += leg.ok() ? 1 : 0;
    if (answered == 0)
      throw Error(Errc::unavailable, config_.label + " renew: " + too_few(0, legs));

    std::vector<Renewed> out;
    out.reserve(grants.size());
    for (std::size_t g = 0; g < grants.size(); ++g) {
      switch (judge_renew(tallies[g], masters_.size())) {
        case RenewVerdict::renewed: {
          const auto left = validity(grants[g].ttl, elapsed);
          // Extended, but the round took so long that nothing is left of the new lease
          // on our clock: the old expiry stands.
          out.push_back(left > Clock::duration::zero() ? Renewed::until(start + left)
                                                       : Renewed::unknown());
          break;
        }
        case RenewVerdict::lost:
          out.push_back(Renewed::lost());
          break;
        case RenewVerdict::undecided:
          out.push_back(Renewed::unknown());
          break;
      }
    }
    return out;
  }

  void release(const GrantRef& grant) override {
    const LockKeys keys = config_.naming.of(grant.key.group, grant.key.name);
    const GrantIdentity id = parse_identity(grant.owner);
    const std::size_t n = masters_.size();
    std::vector<std::vector<ScriptCall>> calls(n);
    std::size_t asked = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if ((id.may_hold >> i & 1u) == 0) continue;
      calls[i].push_back(ScriptCall{&k_withdraw_script,
                                    {keys.lock, keys.withdrawn(id.owner)},
                                    {id.owner, std::to_string(grant.ttl.count())}});
      ++asked;
    }
    // Masters not asked never had the key. One that did not answer keeps it at most
    // until its lease runs out (the command was sent, so one that was only slow still
    // deletes it, or marks the vote withdrawn if the vote is still on its way).
    const auto released = [n, asked](std::span<const Leg> so_far) {
      return tally_of(so_far).answered() + (n - asked) >= quorum(n);
    };
    const auto legs = masters_.run(calls, round_timeout(config_.node_timeout, grant.ttl), released);
    if (!released(legs)) {
      throw Error(Errc::unavailable, config_.label + " release: " +
                                         too_few(tally_of(legs).answered() + (n - asked), legs));
    }
  }

  bool check(const Sequencer& sequencer) override {
    if (sequencer.mode != Mode::exclusive) return false;
    const LockKeys keys = config_.naming.of(sequencer.group, sequencer.name);
    const auto legs = masters_.run_everywhere(
        ScriptCall{&k_check_script, {keys.lock}, {std::to_string(sequencer.token)}},
        config_.node_timeout, [this](std::span<const Leg> so_far) {
          const Tally tally = tally_of(so_far);
          const std::size_t q = quorum(masters_.size());
          return tally.yes >= q || masters_.size() - tally.no < q;
        });
    const Tally tally = tally_of(legs);
    const std::size_t q = quorum(masters_.size());
    if (tally.yes >= q) return true;
    if (tally.yes + tally.no < q) {
      throw Error(Errc::unavailable,
                  config_.label + " check: " + too_few(tally.yes + tally.no, legs));
    }
    return false;
  }

  // A status read is no lease's business: it may take longer than a vote (at least 1 s
  // per round), so a loaded master still answers it.
  LockStatus inspect(const core::LockKey& key) override {
    return inspect_on(masters_, config_.naming, key, status_timeout());
  }

  std::vector<LockSummary> list(std::string_view group) override {
    return list_on(masters_, config_.naming, group, status_timeout());
  }

 private:
  std::chrono::milliseconds status_timeout() const {
    return std::max(config_.node_timeout, std::chrono::milliseconds(1000));
  }

  static void count(Tally& tally, std::optional<bool> vote) {
    if (!vote) {
      ++tally.failed;
    } else if (*vote) {
      ++tally.yes;
    } else {
      ++tally.no;
    }
  }

  static std::uint32_t mask_of(const std::vector<bool>& masters) {
    std::uint32_t mask = 0;
    for (std::size_t i = 0; i < masters.size(); ++i) {
      if (masters[i]) mask |= 1u << i;
    }
    return mask;
  }

  // The yes/no answers of a round of one 1-or-0 script call per master; a master not
  // asked, not (yet) answered or answering anything else is a failed vote.
  static Tally tally_of(std::span<const Leg> legs) {
    Tally tally;
    for (const Leg& leg : legs) {
      count(tally, leg.ok() && !leg.replies.empty() ? yes_or_no(leg.replies[0]) : std::nullopt);
    }
    return tally;
  }

  // Per lease, the answers of a renew.lua round (kRenewChunk leases per call).
  static std::vector<Tally> renew_tallies(std::span<const Leg> legs, std::size_t leases) {
    std::vector<Tally> tallies(leases);
    for (const Leg& leg : legs) {
      for (std::size_t g = 0; g < leases; ++g) {
        std::optional<bool> vote;
        if (leg.ok()) {
          const Reply& reply = leg.replies[g / kRenewChunk];
          const std::size_t n = g % kRenewChunk;
          if (reply.is_array() && n < reply.elements.size()) vote = yes_or_no(reply.elements[n]);
        }
        count(tallies[g], vote);
      }
    }
    return tallies;
  }

  // "k of N masters answered (quorum Q): host:port: why; ..."
  std::string too_few(std::size_t answered, const std::vector<Leg>& legs) const {
    std::string text = std::to_string(answered) + " of " + std::to_string(masters_.size()) +
                       " masters answered (quorum " + std::to_string(quorum(masters_.size())) + ")";
    for (std::size_t i = 0; i < legs.size(); ++i) {
      std::string why;
      if (legs[i].error) {
        why = legs[i].error->what();
      } else {
        for (const Reply& reply : legs[i].replies) {
          if (reply.is_error()) why = reply.text;
        }
      }
      if (!why.empty()) text += "; " + masters_.endpoint(i) + ": " + why;
    }
    return text;
  }

  // One attempt: votes, then (with a quorum) the token, within the lease's validity.
  // A failed attempt leaves no key behind on any master that answered.
  // A wait's count of what its attempts met.
  struct Retrying {
    bool waits = false;  // its deadline was ahead when it began
    int retries = 0;     // a try's attempts after the first
    int collisions = 0;  // split votes in a row
  };

  // One attempt of an acquire, and what it decided (AsyncRetries::Step): the grant, or
  // when to attempt again, or the end. Throws Error(unavailable) for a try whose masters
  // could not be reached.
  AsyncRetries::Step attempt_once(const AcquireRequest& request, const LockKeys& keys,
                                  Retrying& retrying) {
    Attempt attempt = try_once(request, keys);
    AsyncRetries::Step step;
    if (attempt.granted) {
      step.granted = std::move(attempt.granted);
      return step;
    }
    const bool unreachable = attempt.verdict == AcquireVerdict::unreachable;
    retrying.collisions = attempt.verdict == AcquireVerdict::split ? retrying.collisions + 1 : 0;
    // A try gives up at once on a lock a quorum holds, and after retry_count more
    // attempts on split votes or unreachable masters. A wait rides all of that out
    // until its deadline, as masters restart and come back.
    if (!retrying.waits &&
        (attempt.verdict == AcquireVerdict::held || retrying.retries++ >= config_.retry_count)) {
      if (unreachable)
        throw Error(Errc::unavailable, config_.label + " acquire: " + attempt.problem);
      return step;
    }
    const auto wake = Clock::now() + pause(retrying.collisions);
    step.again = retrying.waits ? std::min(wake, request.deadline) : wake;
    if (unreachable) {
      step.at_deadline = std::make_exception_ptr(
          Error(Errc::unavailable, config_.label + " acquire: " + attempt.problem));
    }
    return step;
  }

  Attempt try_once(const AcquireRequest& request, const LockKeys& keys) {
    if (masters_.size() == 1) return try_alone(request, keys);
    const milliseconds ttl = request.options.ttl;
    const milliseconds timeout = round_timeout(config_.node_timeout, ttl);
    const std::string owner = client_id_ + '-' + std::to_string(++sequence_);
    const std::size_t n = masters_.size();

    const auto start = Clock::now();
    const auto votes =
        masters_.run_everywhere(ScriptCall{&k_acquire_script,
                                           {keys.lock, keys.fence, keys.withdrawn(owner)},
                                           {owner, std::to_string(ttl.count())}},
                                timeout, [n](std::span<const Leg> so_far) {
                                  std::size_t yes = 0;
                                  std::size_t no = 0;
                                  for (const Leg& leg : so_far) {
                                    if (const auto read = token_read(leg)) ++(*read ? yes : no);
                                  }
                                  return yes >= quorum(n) || no >= quorum(n);
                                });
    Tally tally;
    std::vector<bool> set_here(n, false);   // our key is there
    std::vector<bool> maybe_set(n, false);  // it may be: a yes, or no clear answer
    std::vector<TokenRead> reads;
    for (std::size_t i = 0; i < n; ++i) {
      const auto read = token_read(votes[i]);
      if (!read) {
        ++tally.failed;
        maybe_set[i] = true;
      } else if (!*read) {
        ++tally.no;
      } else {
        ++tally.yes;
        set_here[i] = maybe_set[i] = true;
        reads.push_back(**read);
      }
    }

    Attempt attempt;
    attempt.verdict = judge_acquire(tally, n);
    attempt.problem = too_few(tally.yes + tally.no, votes);
    if (attempt.verdict == AcquireVerdict::granted) {
      const std::uint64_t token = next_token(reads);
      std::vector<std::vector<ScriptCall>> fence(n);
      for (std::size_t i = 0; i < n; ++i) {
        if (set_here[i]) {
          fence[i].push_back(
              ScriptCall{&k_fence_script,
                         {keys.lock, keys.fence},
                         {owner, std::to_string(token), std::to_string(ttl.count())}});
        }
      }
      const auto written = masters_.run(fence, timeout, [this](std::span<const Leg> so_far) {
        return tally_of(so_far).yes >= quorum(masters_.size());
      });
      Tally fenced = tally_of(written);
      fenced.failed -= n - tally.yes;  // masters without our key were not asked
      const auto left = validity(ttl, Clock::now() - start);
      if (fenced.yes >= quorum(n) && left > Clock::duration::zero()) {
        attempt.granted = Granted{GrantRef{request.key, Mode::exclusive, token, ttl,
                                           grant_identity(owner, mask_of(maybe_set))},
                                  start + left};
        return attempt;
      }
      attempt.problem = fenced.yes >= quorum(n)
                            ? "the votes took longer than the lease's validity"
                            : "the token was written to " + std::to_string(fenced.yes) + " of " +
                                  std::to_string(n) + " masters; " +
                                  too_few(fenced.yes + fenced.no, written);
      // Masters that failed the write count as unreachable; keys that vanished there
      // (expired, or taken over) as contention.
      attempt.verdict =
          fenced.failed > n - quorum(n) ? AcquireVerdict::unreachable : AcquireVerdict::split;
    }

    // Undo: delete our key wherever it may be. A master that answered "no" never set it.
    std::vector<std::vector<ScriptCall>> undo(n);
    std::size_t asked = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!maybe_set[i]) continue;
      undo[i].push_back(ScriptCall{&k_withdraw_script,
                                   {keys.lock, keys.withdrawn(owner)},
                                   {owner, std::to_string(ttl.count())}});
      ++asked;
    }
    // Nothing waits on the outcome, so once no more than a minority of the masters is
    // silent the rest are not waited for beyond the grace (a key a silent one keeps
    // lapses by its TTL).
    masters_.run(undo, timeout, [n, asked](std::span<const Leg> so_far) {
      return tally_of(so_far).answered() + (n - asked) >= quorum(n);
    });
    return attempt;
  }

  // One attempt on the only master: the vote and the token in one script
  // (acquire_alone.lua), so a grant takes one round trip where a quorum takes two. The
  // token is the one next_token would draw from this master's read.
  Attempt try_alone(const AcquireRequest& request, const LockKeys& keys) {
    const milliseconds ttl = request.options.ttl;
    const milliseconds timeout = round_timeout(config_.node_timeout, ttl);
    const std::string owner = client_id_ + '-' + std::to_string(++sequence_);
    const auto start = Clock::now();
    const auto legs =
        masters_.run_everywhere(ScriptCall{&k_acquire_alone_script,
                                           {keys.lock, keys.fence, keys.withdrawn(owner)},
                                           {owner, std::to_string(ttl.count())}},
                                timeout);
    const auto answer = legs[0].ok() ? granted_token_of(legs[0].replies[0]) : std::nullopt;
    Attempt attempt;
    if (answer && !*answer) {
      attempt.verdict = AcquireVerdict::held;
      return attempt;
    }
    if (answer) {
      const auto left = validity(ttl, Clock::now() - start);
      if (left > Clock::duration::zero()) {
        attempt.granted =
            Granted{GrantRef{request.key, Mode::exclusive, **answer, ttl, grant_identity(owner, 1)},
                    start + left};
        return attempt;
      }
      attempt.verdict = AcquireVerdict::split;
      attempt.problem = "the acquire took longer than the lease's validity";
    } else {
      attempt.verdict = AcquireVerdict::unreachable;
      attempt.problem = too_few(0, legs);
    }
    // Undo: a lost or late reply may hide a SET that happened.
    masters_.run_everywhere(ScriptCall{&k_withdraw_script,
                                       {keys.lock, keys.withdrawn(owner)},
                                       {owner, std::to_string(ttl.count())}},
                            timeout);
    return attempt;
  }

  // acquire.lua's answer on one master: nullopt for a failed vote, false for "held by
  // another", or our read of the token.
  static std::optional<std::optional<TokenRead>> token_read(const Leg& leg) {
    if (!leg.ok()) return std::nullopt;
    return token_read_of(leg.replies[0]);
  }

  // Uniform in [delay, delay + jitter]; after split votes in a row, that many times
  // longer (doubling, up to 32×), so that contenders who keep splitting the masters'
  // votes between them spread out instead of colliding again in step. A lock that is
  // simply held is polled at the plain pace.
  Clock::duration pause(int collisions) {
    std::lock_guard guard(random_mu_);
    std::uniform_int_distribution<std::int64_t> spread(0, config_.retry_jitter.count());
    const auto base = config_.retry_delay + milliseconds(spread(random_));
    return base * (std::int64_t{1} << std::min(collisions, 5));
  }

  static void pause_until(Clock::time_point until, const std::stop_token& stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_until(lock, stop, until, [] { return false; });
  }

  const RedlockConfig config_;
  Masters masters_;
  const std::string client_id_;
  std::atomic<std::uint64_t> sequence_{0};
  std::mutex random_mu_;
  std::mt19937_64 random_;                                               // guarded by random_mu_
  const std::shared_ptr<AsyncRetries> retries_ = AsyncRetries::start();  // last
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  auto engine = std::make_unique<RedlockEngine>(parse_config(uri, options));
  engine->connect();
  return engine;
}

std::unique_ptr<core::Engine> open_simple(const redis::RedisConfig& redis,
                                          const ClientOptions& options) {
  auto engine = std::make_unique<RedlockEngine>(single_master_config(redis, options));
  engine->connect();
  return engine;
}

}  // namespace warden::engines::redlock
