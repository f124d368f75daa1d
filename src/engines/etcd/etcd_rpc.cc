#include "engines/etcd/etcd_rpc.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "engines/etcd/etcd_tls.h"
#include "engines/resp_client/backoff.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "warden/error.h"

namespace warden::engines::etcd {
namespace {

// A member worth leaving for the next one: down, paused, cut off, or without a leader.
bool is_transient(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// A member that is up but cannot serve the call until a leader is elected: etcd's own
// "leader changed", "no leader", "request timed out" (its proposal went to a leader that
// died), as opposed to gRPC failing to reach the member at all.
bool is_leaderless(const grpc::Status& status) {
  return status.error_message().starts_with("etcdserver: ");
}

// A connection that broke under a call already sent (the member closed it, went away or
// was restarted), as opposed to one that could not be opened. etcd's Go HTTP/2 server
// also ends a TLS connection now and then with a GOAWAY under load. The call may or may
// not have been applied: every call warden makes is safe to make again (a Txn puts its
// request key only if absent, a lease granted twice leaves one unused to expire).
bool is_broken_connection(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  const std::string& message = status.error_message();
  // gRPC's words for a connection that was never made, whatever ended the attempt (a
  // refusal, or a member that accepted and closed it: a TLS peer refusing us).
  if (message.find("failed to connect") != std::string::npos) return false;
  for (const char* sign : {"Socket closed", "GOAWAY", "Connection reset", "Broken pipe"}) {
    if (message.find(sign) != std::string::npos) return true;
  }
  return false;
}

// A connection attempt that gRPC gave up because the member was slow to answer it (no
// HTTP/2 SETTINGS frame, or no TLS handshake, within the attempt's time), as a member on
// a loaded machine can be: the member is there, and a call whose budget is not spent
// waits for the next attempt instead of failing. A refused connection is not this.
bool is_slow_connect(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  const std::string& message = status.error_message();
  if (message.find("failed to connect") == std::string::npos) return false;
  // gRPC writes "Handshaker shutdown" or "handshaker shutdown" by version.
  return message.find("timed out") != std::string::npos ||
         message.find("Timeout occurred") != std::string::npos ||
         message.find("andshaker shutdown") != std::string::npos;
}

// etcd's "invalid auth token": the token expired (or the member restarted).
bool is_expired_token(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED;
}

Error status_error(const grpc::Status& status, const std::string& what, const std::string& endpoint,
                   bool tls) {
  if (const auto failure = tls_failure(status, tls)) {
    return Error(failure->code, what + " on etcd member " + endpoint + ": " + failure->why + " (" +
                                    status.error_message() + ")");
  }
  const std::string message = what + " on etcd member " + endpoint + ": " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Error(Errc::unavailable, message);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Error(Errc::deadline_exceeded, message);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return Error(Errc::permission_denied, message);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Error(Errc::resource_exhausted, message);
    case grpc::StatusCode::NOT_FOUND:
      return Error(Errc::lost, message);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      // A cluster with auth on and no user given ("user name is empty"), a wrong user or
      // password ("authentication failed"), or auth asked of a cluster without it.
      if (status.error_message().find("auth") != std::string::npos ||
          status.error_message().find("user") != std::string::npos) {
        return Error(Errc::permission_denied, message);
      }
      return Error(Errc::internal, message);
    default:
      return Error(Errc::internal, message);
  }
}

// How often a connection with calls under way is pinged (above the 5 s etcd accepts).
constexpr std::chrono::milliseconds kKeepAliveTime{10'000};

// The longest a TLS diagnosis of a failed open may take per member (tls_probe.h).
constexpr std::chrono::milliseconds kProbeLimit{2'000};

Clock::time_point capped(Clock::time_point until) {
  // gRPC deadlines are system_clock based: keep far-off ones finite.
  return std::min(until, Clock::now() + std::chrono::hours(24));
}

std::chrono::system_clock::time_point to_system(Clock::time_point until) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(capped(until) -
                                                                         Clock::now());
}

}  // namespace

struct EtcdRpc::Member {
  Member(std::string target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
         const EtcdConfig& config)
      : endpoint(std::move(target)) {
    grpc::ChannelArguments args;
    // A restarted member is found again within a second, not after gRPC's default
    // back-off of up to two minutes.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // gRPC takes the "minimum back-off" as the least time one connection attempt gets
    // (it does not lengthen the 100 ms–1 s pause between attempts). A member on a loaded
    // machine can take longer than 100 ms to send its HTTP/2 SETTINGS frame or finish a
    // TLS handshake: the attempt then failed, and with it the call. An attempt gets
    // op_timeout, like any call; a refused connection still fails at once. Set once
    // only: of two values for one argument, gRPC takes the first.
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
                static_cast<int>(std::min<std::int64_t>(config.op_timeout.count(), 60'000)));
    // gRPC shares connections to one address between channels by default: a new Client
    // would inherit another Client's connection still backing off from a member that was
    // down, and fail at once although the member is back. Each channel its own.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // A connection that went silent (a NAT or firewall forgot it: no FIN, no RST) would
    // otherwise look alive forever, and every call on it ran out of time, also long after
    // the network healed. While calls are under way, a ping every kKeepAliveTime that
    // gets no answer within op_timeout closes it, and the next call connects anew. Only
    // while calls are under way: etcd (like every gRPC server by default) answers pings
    // on an idle connection, or more often than every 5 s, by closing it.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(kKeepAliveTime.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(std::clamp<std::int64_t>(
                                                   config.op_timeout.count(), 1'000, 60'000)));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    channel = grpc::CreateCustomChannel(endpoint, credentials, args);
    kv = etcdserverpb::KV::NewStub(channel);
    lease = etcdserverpb::Lease::NewStub(channel);
    watch = etcdserverpb::Watch::NewStub(channel);
    maintenance = etcdserverpb::Maintenance::NewStub(channel);
    auth = etcdserverpb::Auth::NewStub(channel);
  }

  const std::string endpoint;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  std::unique_ptr<etcdserverpb::Auth::Stub> auth;

  std::mutex mu;
  std::optional<std::string> token;  // guarded by mu
};

EtcdRpc::EtcdRpc(const EtcdConfig& config) : config_(config) {
  // One set of credentials for every member: the files are read once, here.
  const auto credentials = channel_credentials(config_.tls);
  for (const std::string& endpoint : config_.endpoints) {
    members_.push_back(std::make_unique<Member>(endpoint, credentials, config_));
  }
}


void EtcdRpc::move_on_from(std::size_t index) {
  // Only the first caller to see `index` fail moves on, so a burst of failures of one
  // member skips one member, not several.
  std::size_t expected = index;
  current_.compare_exchange_strong(expected, (index + 1) % members_.size());
}

std::string EtcdRpc::describe_current() const {
  return "etcd member " +
         members_[current_.load(std::memory_order_relaxed) % members_.size()]->endpoint;
}

grpc::Status EtcdRpc::authorize(Member& member, grpc::ClientContext& context,
                                Clock::time_point deadline) {
  if (!config_.user) return grpc::Status::OK;
  std::lock_guard lock(member.mu);
  if (!member.token) {
    grpc::ClientContext auth_context;
    auth_context.set_deadline(to_system(deadline));
    etcdserverpb::AuthenticateRequest request;
    request.set_name(*config_.user);
    request.set_password(*config_.password);
    etcdserverpb::AuthenticateResponse response;
    const grpc::Status status = member.auth->Authenticate(&auth_context, request, &response);
    if (!status.ok()) return status;
    member.token = response.token();
  }
  context.AddMetadata("token", *member.token);
  return grpc::Status::OK;
}

// One call's way through the members, by the policy in etcd_rpc.h, one step at a time, so
// that the blocking calls (with_failover) and the asynchronous ones (txn_async) share it.
//
// Passes over the members, each visited once per pass starting at the current one (other
// threads may move current_ meanwhile; a pass of our own still covers them all). A pass in
// which some member answered that the cluster has no leader just now is followed by
// another, after a pause, until `timeout` has passed since the call began: an election is
// under way. A pass in which no member could be reached ends the call, unless a member's
// connection broke under the call, or gRPC gave up connecting to it because it was slow to
// answer: then the next pass asks again, and waits (within the budget) for gRPC to connect
// anew, as etcd's own client does. The caller's bound cuts every attempt short, the first
// pass's too.
class EtcdRpc::Failover {
 public:
  Failover(EtcdRpc& rpc, const char* what, std::chrono::milliseconds timeout, const Bound& bound)
      : rpc_(rpc),
        what_(what),
        timeout_(timeout),
        bound_(bound),
        give_up_(std::min(Clock::now() + timeout, bound.until)),
        pause_(rpc.config_.retry) {
    start_pass();
  }

  // What to do next: ask `member` by `deadline`, or first pause for `pause`.
  struct Step {
    std::size_t member = 0;
    Clock::time_point deadline;
    bool wait_for_ready = false;
    Clock::duration pause{};  // > 0: pause this long, then ask next() again
  };

  // Throws the call's error once it has failed.
  Step next() {
    const std::size_t count = rpc_.members_.size();
    if (step_ == count) {
      // A connection can break again while it is made anew (a relay or NAT that dropped
      // it closes the next one too, until it has settled): each pass after a break waits
      // for a new connection, within the budget, a short pause apart after the first.
      const bool any_broke = std::find(broke_.begin(), broke_.end(), 1) != broke_.end();
      if (any_broke && Clock::now() < give_up_) {
        Clock::duration wait{};
        if (!reconnecting_.empty()) {
          wait = std::min<Clock::duration>(
              pause_.next_delay(), std::max(give_up_ - Clock::now(), Clock::duration::zero()));
        }
        reconnecting_ = std::move(broke_);
        start_pass();
        if (wait > Clock::duration::zero()) return Step{0, {}, false, wait};
      } else {
        const auto delay = pause_.next_delay();
        if (!electing_ || Clock::now() + delay >= give_up_) throw *last_;
        start_pass();
        return Step{0, {}, false, delay};
      }
    }
    if (bound_.stop.stop_requested() || Clock::now() >= bound_.until) throw out_of_bound();
    member_ = (first_ + step_) % count;
    // The first pass gives every member the whole timeout, so a frozen member costs one
    // timeout before the next is asked; later passes end with the call's budget.
    const auto attempt_timeout =
        pass_ == 0 ? Clock::duration(timeout_)
                   : std::max(give_up_ - Clock::now(), Clock::duration::zero());
    return Step{member_, std::min(Clock::now() + attempt_timeout, bound_.until),
                !reconnecting_.empty() && reconnecting_[member_] != 0, {}};
  }

  // The attempt next() asked for ended with `status`: true if the call succeeded, false
  // to ask next() again. Throws the call's error once it has failed.
  bool settle(const grpc::Status& status) {
    if (status.ok()) return true;
    Member& member = *rpc_.members_[member_];
    if (bound_.stop.stop_requested() || Clock::now() >= bound_.until) throw out_of_bound();
    if (is_expired_token(status) && rpc_.config_.user && !reauthorized_) {
      std::lock_guard lock(member.mu);
      member.token.reset();
      reauthorized_ = true;  // the same member once more
      return false;
    }
    const bool tls = rpc_.config_.tls.enabled;
    if (!is_transient(status)) throw status_error(status, what_, member.endpoint, tls);
    const bool waited_in_vain = !reconnecting_.empty() && reconnecting_[member_] != 0 &&
                                status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    // No new connection within the budget: the member is down, as the break said.
    if (!waited_in_vain) last_ = status_error(status, what_, member.endpoint, tls);
    electing_ = electing_ || is_leaderless(status);
    broke_[member_] = is_broken_connection(status) || is_slow_connect(status) ? 1 : 0;
    rpc_.move_on_from(member_);
    ++step_;
    reauthorized_ = false;
    return false;
  }

  const Bound& bound() const { return bound_; }

 private:
  void start_pass() {
    if (started_) ++pass_;
    started_ = true;
    step_ = 0;
    electing_ = false;
    broke_.assign(rpc_.members_.size(), 0);
    first_ = rpc_.current_.load(std::memory_order_relaxed);
  }

  Error out_of_bound() const {
    return Error(Errc::deadline_exceeded,
                 std::string(what_) + ": " +
                     (bound_.stop.stop_requested() ? "cancelled" : "out of the caller's time"));
  }

  EtcdRpc& rpc_;
  const char* const what_;
  const std::chrono::milliseconds timeout_;
  const Bound bound_;
  const Clock::time_point give_up_;
  resp_client::Backoff pause_;
  std::optional<Error> last_;
  bool started_ = false;
  int pass_ = 0;
  std::size_t step_ = 0;
  std::size_t first_ = 0;
  std::size_t member_ = 0;
  bool reauthorized_ = false;
  bool electing_ = false;
  std::vector<char> broke_;
  // The members asked again after their connection broke; only they wait for a new one.
  std::vector<char> reconnecting_;
};

void EtcdRpc::with_failover(const char* what, std::chrono::milliseconds timeout, const Body& body,
                            Sent* sent, const Bound& bound) {
  Failover failover(*this, what, timeout, bound);
  while (true) {
    const Failover::Step step = failover.next();
    if (step.pause > Clock::duration::zero()) {
      std::this_thread::sleep_for(step.pause);
      continue;
    }
    Member& member = *members_[step.member];
    grpc::ClientContext context;
    const auto started = Clock::now();
    context.set_deadline(to_system(step.deadline));
    context.set_wait_for_ready(step.wait_for_ready);
    const std::stop_callback cancel(bound.stop, [&context] { context.TryCancel(); });
    grpc::Status status = authorize(member, context, step.deadline);
    if (status.ok()) status = body(member, context);
    if (failover.settle(status)) {
      if (sent != nullptr) sent->at = started;
      return;
    }
  }
}

// One txn_async call: its failover, its current attempt's context or pause, and its
// answer. Its `context` and `alarm` are touched under the EtcdRpc's async_mu_.
struct EtcdRpc::AsyncTxn {
  AsyncTxn(EtcdRpc& rpc, etcdserverpb::TxnRequest r, Clock::time_point until, TxnDone d)
      : alive(rpc.calls_alive_),
        failover(rpc, "txn", rpc.config_.op_timeout, Bound{until, {}}),
        request(std::move(r)),
        done(std::move(d)) {}

  // The destructor's: ends the attempt or the pause under way.
  void cancel() {
    if (context) context->TryCancel();
    if (pausing) alarm.Cancel();
  }

  // First, so destroyed last: counted until its context (and channel) are gone.
  core::InFlight::Token alive;
  Failover failover;
  const etcdserverpb::TxnRequest request;
  etcdserverpb::TxnResponse response;
  std::unique_ptr<grpc::ClientContext> context;
  grpc::Alarm alarm;
  bool pausing = false;
  TxnDone done;
};

EtcdRpc::~EtcdRpc() {
  std::unique_lock lock(async_mu_);
  closing_ = true;
  for (const auto& call : in_flight_) call->cancel();
  lock.unlock();
  // Answered and destroyed: a call's callback may still hold it after finish().
  calls_alive_.wait_idle();
}

void EtcdRpc::txn_async(etcdserverpb::TxnRequest request, Clock::time_point until, TxnDone done) {
  auto call = std::make_shared<AsyncTxn>(*this, std::move(request), until, std::move(done));
  bool taken = false;
  {
    std::lock_guard lock(async_mu_);
    if (!closing_) taken = in_flight_.insert(call).second;
  }
  if (!taken) {
    call->done({}, std::make_exception_ptr(Error(Errc::unavailable, "the etcd:// client is closing")));
    return;
  }
  step(call);
}

void EtcdRpc::step(const std::shared_ptr<AsyncTxn>& call) {
  Failover::Step next;
  try {
    next = call->failover.next();
  } catch (const Error&) {
    finish(call, std::current_exception());
    return;
  }
  std::unique_lock lock(async_mu_);
  if (closing_) {
    lock.unlock();
    finish(call, std::make_exception_ptr(Error(Errc::unavailable, "the etcd:// client is closing")));
    return;
  }
  if (next.pause > Clock::duration::zero()) {
    call->pausing = true;
    call->alarm.Set(to_system(Clock::now() + next.pause), [this, call](bool fired) {
      {
        std::lock_guard relock(async_mu_);
        call->pausing = false;
      }
      if (fired) {
        step(call);
      } else {
        finish(call, std::make_exception_ptr(Error(Errc::unavailable, "the etcd:// client is closing")));
      }
    });
    return;
  }
  Member& member = *members_[next.member];
  call->context = std::make_unique<grpc::ClientContext>();
  call->context->set_deadline(to_system(next.deadline));
  call->context->set_wait_for_ready(next.wait_for_ready);
  lock.unlock();
  // Blocks only to authenticate, once per member and token.
  const grpc::Status authorized = authorize(member, *call->context, next.deadline);
  if (!authorized.ok()) {
    answered(call, authorized);
    return;
  }
  call->response.Clear();
  member.kv->async()->Txn(call->context.get(), &call->request, &call->response,
                          [this, call](grpc::Status status) { answered(call, status); });
}

void EtcdRpc::answered(const std::shared_ptr<AsyncTxn>& call, const grpc::Status& status) {
  bool succeeded = false;
  try {
    succeeded = call->failover.settle(status);
  } catch (const Error&) {
    finish(call, std::current_exception());
    return;
  }
  if (succeeded) {
    finish(call, nullptr);
  } else {
    step(call);
  }
}

void EtcdRpc::finish(const std::shared_ptr<AsyncTxn>& call, std::exception_ptr error) {
  auto done = std::move(call->done);
  done(error ? etcdserverpb::TxnResponse() : std::move(call->response), error);
  std::lock_guard lock(async_mu_);
  in_flight_.erase(call);
}

std::size_t EtcdRpc::open_watch(grpc::ClientContext& context, WatchReactor& reactor) {
  const std::size_t index = current_member();
  Member& member = *members_[index];
  context.AddMetadata("hasleader", "true");
  const grpc::Status status = authorize(member, context, Clock::now() + config_.op_timeout);
  if (!status.ok()) throw status_error(status, "watch", member.endpoint, config_.tls.enabled);
  member.watch->async()->Watch(&context, &reactor);
  reactor.StartCall();
  return index;
}

void EtcdRpc::ping() {
  try {
    ping_members();
  } catch (const Error& error) {
    if (auto better = explain_open_failure(error, config_.endpoints, config_.tls,
                                           std::min(config_.op_timeout, kProbeLimit))) {
      throw *better;
    }
    throw;
  }
}

void EtcdRpc::ping_members() {
  with_failover("status", config_.op_timeout, [](Member& member, grpc::ClientContext& context) {
    etcdserverpb::StatusResponse response;
    return member.maintenance->Status(&context, etcdserverpb::StatusRequest(), &response);
  });
  // Status needs no credentials; a read does, so a wrong password fails here.
  etcdserverpb::RangeRequest probe;
  probe.set_key(config_.prefix + '/');
  probe.set_count_only(true);
  range(probe);
}

etcdserverpb::TxnResponse EtcdRpc::txn(const etcdserverpb::TxnRequest& request, Sent* sent,
                                       std::chrono::milliseconds timeout, const Bound& bound) {
  etcdserverpb::TxnResponse response;
  with_failover(
      "txn", timeout.count() > 0 ? timeout : config_.op_timeout,
      [&](Member& member, grpc::ClientContext& context) {
        return member.kv->Txn(&context, request, &response);
      },
      sent, bound);
  return response;
}

etcdserverpb::RangeResponse EtcdRpc::range(const etcdserverpb::RangeRequest& request,
                                           const Bound& bound) {
  etcdserverpb::RangeResponse response;
  with_failover(
      "range", config_.op_timeout,
      [&](Member& member, grpc::ClientContext& context) {
        return member.kv->Range(&context, request, &response);
      },
      nullptr, bound);
  return response;
}

etcdserverpb::LeaseGrantResponse EtcdRpc::lease_grant(std::int64_t ttl_seconds, Sent* sent) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse response;
  // A retry after a lost reply leaves the first lease unused; it ends by its TTL.
  with_failover(
      "lease grant", config_.op_timeout,
      [&](Member& member, grpc::ClientContext& context) {
        return member.lease->LeaseGrant(&context, request, &response);
      },
      sent);
  if (!response.error().empty() || response.id() == 0) {
    throw Error(Errc::internal, "lease grant on " + describe_current() + ": " +
                                    (response.error().empty() ? "no lease id" : response.error()));
  }
  return response;
}

void EtcdRpc::lease_revoke(std::int64_t id, const Bound& bound) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  with_failover(
      "lease revoke", config_.op_timeout,
      [&](Member& member, grpc::ClientContext& context) {
        etcdserverpb::LeaseRevokeResponse response;
        grpc::Status status = member.lease->LeaseRevoke(&context, request, &response);
        // Already gone (expired, or revoked by an earlier attempt): done.
        if (status.error_code() == grpc::StatusCode::NOT_FOUND) return grpc::Status::OK;
        return status;
      },
      nullptr, bound);
}

std::vector<std::int64_t> EtcdRpc::keep_alive(std::span<const std::int64_t> ids,
                                              std::chrono::milliseconds timeout, Sent* sent) {
  std::vector<std::int64_t> ttls;
  with_failover(
      "lease keep-alive", timeout,
      [&](Member& member, grpc::ClientContext& context) {
        ttls.assign(ids.size(), 0);
        auto stream = member.lease->LeaseKeepAlive(&context);
        for (const std::int64_t id : ids) {
          etcdserverpb::LeaseKeepAliveRequest request;
          request.set_id(id);
          if (!stream->Write(request)) return stream->Finish();
        }
        // The server answers each request in order, one at a time.
        std::map<std::int64_t, std::int64_t> answered;
        etcdserverpb::LeaseKeepAliveResponse response;
        while (answered.size() < ids.size() && stream->Read(&response)) {
          answered[response.id()] = response.ttl();
        }
        if (answered.size() < ids.size()) {
          context.TryCancel();
          grpc::Status status = stream->Finish();
          return status.ok()
                     ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream ended early")
                     : status;
        }
        stream->WritesDone();
        const grpc::Status status = stream->Finish();
        for (std::size_t i = 0; i < ids.size(); ++i) ttls[i] = answered[ids[i]];
        return status;
      },
      sent);
  return ttls;
}

EtcdRpc::WatchEnd EtcdRpc::wait_for_delete(const std::string& key, std::int64_t start_revision,
                                           Clock::time_point until, std::stop_token stop,
                                           const std::string& range_end) {
  WatchEnd end = WatchEnd::other;
  watch_stream(key, range_end, start_revision, /*deletes_only=*/true, until, stop,
               [&](const etcdserverpb::WatchResponse& response) {
                 // A compacted start revision or a cancelled watch: the caller looks again.
                 if (response.compact_revision() > 0 || response.canceled()) {
                   end = WatchEnd::deleted;
                 }
                 for (const auto& event : response.events()) {
                   if (event.type() == mvccpb::Event::DELETE) end = WatchEnd::deleted;
                 }
                 return end == WatchEnd::deleted;
               });
  return end;
}

std::optional<std::int64_t> EtcdRpc::wait_for_change(const std::string& key,
                                                     const std::string& range_end,
                                                     std::int64_t start_revision,
                                                     Clock::time_point until, std::stop_token stop,
                                                     bool& failed) {
  std::optional<std::int64_t> next;
  bool cancelled = false;
  failed = !watch_stream(key, range_end, start_revision, /*deletes_only=*/false, until, stop,
                         [&](const etcdserverpb::WatchResponse& response) {
                           if (response.compact_revision() > 0) {
                             next = response.compact_revision();
                           } else if (response.canceled()) {
                             cancelled = true;
                             return true;
                           }
                           for (const auto& event : response.events()) {
                             next = std::max(next.value_or(0), event.kv().mod_revision() + 1);
                           }
                           return next.has_value();
                         });
  if (cancelled && !next) failed = true;  // the member dropped the watch: look elsewhere
  return failed ? std::nullopt : next;
}

bool EtcdRpc::watch_stream(const std::string& key, const std::string& range_end,
                           std::int64_t start_revision, bool deletes_only, Clock::time_point until,
                           const std::stop_token& stop,
                           const std::function<bool(const etcdserverpb::WatchResponse&)>& done) {
  if (stop.stop_requested() || Clock::now() >= until) return true;
  const std::size_t index = current_.load(std::memory_order_relaxed) % members_.size();
  Member& member = *members_[index];
  grpc::ClientContext context;
  context.set_deadline(to_system(until));
  // A member cut off from the leader cancels the watch instead of keeping it silent.
  context.AddMetadata("hasleader", "true");
  if (!authorize(member, context, Clock::now() + config_.op_timeout).ok()) {
    return false;  // the caller's next read reports the auth failure
  }
  std::stop_callback cancel(stop, [&context] { context.TryCancel(); });

  auto stream = member.watch->Watch(&context);
  etcdserverpb::WatchRequest request;
  auto* create = request.mutable_create_request();
  create->set_key(key);
  if (!range_end.empty()) create->set_range_end(range_end);
  create->set_start_revision(start_revision);
  if (deletes_only) create->add_filters(etcdserverpb::WatchCreateRequest::NOPUT);
  bool finished = false;
  if (stream->Write(request)) {
    etcdserverpb::WatchResponse response;
    while (!finished && stream->Read(&response)) finished = done(response);
  }
  context.TryCancel();
  const grpc::Status status = stream->Finish();
  if (!finished && is_transient(status) && !stop.stop_requested() && Clock::now() < until) {
    move_on_from(index);  // down or leaderless: the next look goes elsewhere
    return false;
  }
  return true;
}

}  // namespace warden::engines::etcd
