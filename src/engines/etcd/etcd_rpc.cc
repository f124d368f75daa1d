#include "engines/etcd/etcd_rpc.h"

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

EtcdRpc::~EtcdRpc() = default;

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

void EtcdRpc::with_failover(const char* what, std::chrono::milliseconds timeout, const Body& body,
                            Sent* sent, const Bound& bound) {
  // Passes over the members, each visited once per pass starting at the current one
  // (other threads may move current_ meanwhile; a pass of our own still covers them all).
  // A pass in which some member answered that the cluster has no leader just now is
  // followed by another, after a pause, until `timeout` has passed since the call began:
  // an election is under way. A pass in which no member could be reached ends the call,
  // unless a member's connection broke under the call, or gRPC gave up connecting to it
  // because it was slow to answer: then the next pass asks again, and waits (within the
  // budget) for gRPC to connect anew, as etcd's own client does.
  // The caller's bound cuts every attempt short, the first pass's too.
  const auto give_up = std::min(Clock::now() + timeout, bound.until);
  const auto out_of_bound = [&] {
    return Error(Errc::deadline_exceeded,
                 std::string(what) + ": " +
                     (bound.stop.stop_requested() ? "cancelled" : "out of the caller's time"));
  };
  resp_client::Backoff pause(config_.retry);
  std::optional<Error> last;
  // The members asked again after their connection broke; only they wait for a new one.
  std::vector<char> reconnecting;
  for (int pass = 0;; ++pass) {
    bool electing = false;
    std::vector<char> broke(members_.size(), 0);
    const std::size_t first = current_.load(std::memory_order_relaxed);
    for (std::size_t step = 0; step < members_.size(); ++step) {
      const std::size_t index = (first + step) % members_.size();
      Member& member = *members_[index];
      // The first pass gives every member the whole timeout, so a frozen member costs one
      // timeout before the next is asked; later passes end with the call's budget.
      const auto attempt_timeout =
          pass == 0 ? timeout : std::max(give_up - Clock::now(), Clock::duration::zero());
      for (int auth_round = 0; auth_round < 2; ++auth_round) {
        if (bound.stop.stop_requested() || Clock::now() >= bound.until) throw out_of_bound();
        grpc::ClientContext context;
        const auto started = Clock::now();
        const auto deadline = std::min(started + attempt_timeout, bound.until);
        context.set_deadline(to_system(deadline));
        context.set_wait_for_ready(!reconnecting.empty() && reconnecting[index] != 0);
        const std::stop_callback cancel(bound.stop, [&context] { context.TryCancel(); });
        grpc::Status status = authorize(member, context, deadline);
        if (status.ok()) status = body(member, context);
        if (status.ok()) {
          if (sent != nullptr) sent->at = started;
          return;
        }
        if (bound.stop.stop_requested() || Clock::now() >= bound.until) throw out_of_bound();
        if (is_expired_token(status) && config_.user && auth_round == 0) {
          std::lock_guard lock(member.mu);
          member.token.reset();
          continue;
        }
        if (!is_transient(status)) {
          throw status_error(status, what, member.endpoint, config_.tls.enabled);
        }
        const bool waited_in_vain = !reconnecting.empty() && reconnecting[index] != 0 &&
                                    status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
        // No new connection within the budget: the member is down, as the break said.
        if (!waited_in_vain)
          last = status_error(status, what, member.endpoint, config_.tls.enabled);
        electing = electing || is_leaderless(status);
        broke[index] = is_broken_connection(status) || is_slow_connect(status) ? 1 : 0;
        move_on_from(index);
        break;
      }
    }
    // A connection can break again while it is made anew (a relay or NAT that dropped
    // it closes the next one too, until it has settled): each pass after a break waits
    // for a new connection, within the budget, a short pause apart after the first.
    const bool any_broke = std::find(broke.begin(), broke.end(), 1) != broke.end();
    if (any_broke && Clock::now() < give_up) {
      if (!reconnecting.empty())
        std::this_thread::sleep_for(std::min<Clock::duration>(
            pause.next_delay(), std::max(give_up - Clock::now(), Clock::duration::zero())));
      reconnecting = std::move(broke);
      continue;
    }
    const auto delay = pause.next_delay();
    if (!electing || Clock::now() + delay >= give_up) throw *last;
    std::this_thread::sleep_for(delay);
  }
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
