// engines/etcd/etcd_rpc.h — warden's gRPC client of an etcd cluster: one channel per
// member, failover, auth, and the few calls the engine makes.
//
// Failover: calls go to the current member. One that fails with UNAVAILABLE or
// DEADLINE_EXCEEDED (down, paused, cut off, no leader) makes the next member current
// and the call is retried there. A pass asks every member once. While an election is
// under way the members that are up may all refuse at once ("leader changed", "no
// leader"); after such a pass the call pauses (the retry policy) and makes another, until
// its timeout has passed since it began. A pass that reached no member throws. Every call the
// engine makes is safe to repeat (creates are guarded by create_revision == 0 on a key of its own,
// deletes and a proclaim's put by its create_revision, the rest are reads or lease calls), so a
// retry after a lost reply changes nothing.
//
// Auth: with a user, each member's channel authenticates once and sends the token as
// the "token" metadata of every call; a call refused because the token expired
// authenticates again and is retried once.
//
// TLS (etcds://, tls=1): channel credentials and the TLS failures in etcd_tls.h.
//
// Errors: grpc::Status codes become warden::Error in one place (status_error):
// UNAVAILABLE → unavailable, DEADLINE_EXCEEDED → deadline_exceeded, PERMISSION_DENIED /
// UNAUTHENTICATED / a failed Authenticate → permission_denied, RESOURCE_EXHAUSTED →
// resource_exhausted, NOT_FOUND ("requested lease not found": a put on a lease that
// expired) → lost, anything else → internal.
//
// Thread safety: every method may be called from any thread concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "core/in_flight.h"
#include "engines/etcd/etcd_config.h"
#include "etcdserverpb/rpc.pb.h"
#include "warden/types.h"

namespace grpc {
class ClientContext;
class Status;
template <class Request, class Response>
class ClientBidiReactor;
}  // namespace grpc

namespace warden::engines::etcd {

// What an EtcdRpc call may not outlast besides its timeout: the end of its caller's
// budget (a wait's deadline plus op_timeout), and its caller's stop, which cancels the
// attempt under way. A call that reaches either throws Error(deadline_exceeded).
struct CallBound {
  Clock::time_point until = Clock::time_point::max();
  std::stop_token stop;
};

class EtcdRpc {
 public:
  explicit EtcdRpc(const EtcdConfig& config);
  ~EtcdRpc();
  EtcdRpc(const EtcdRpc&) = delete;
  EtcdRpc& operator=(const EtcdRpc&) = delete;

  // Asks a member for its status (and authenticates): Client::open's reachability and
  // credentials check. A failure that only a TLS handshake of our own can explain is
  // explained (etcd_tls.h): permission_denied when a member refused our certificate.
  void ping();

  // The send time of the attempt that was answered: a lease kept alive or granted by
  // the call lives at least until then plus its TTL.
  struct Sent {
    Clock::time_point at;
  };

  using Bound = CallBound;

  // `timeout` bounds each member's attempt; 0 means op_timeout.
  etcdserverpb::TxnResponse txn(const etcdserverpb::TxnRequest& request, Sent* sent = nullptr,
                                std::chrono::milliseconds timeout = {}, const Bound& bound = {});
  etcdserverpb::RangeResponse range(const etcdserverpb::RangeRequest& request,
                                    const Bound& bound = {});
  // txn() without blocking: the same attempts on the same members with the same failover
  // (op_timeout each), on gRPC's asynchronous API, its pauses on gRPC's alarms. `done`
  // is called once, on a gRPC thread, with the response or the Error txn() would throw;
  // with Error(unavailable) when this object is destroyed first (its destructor cancels
  // every such call and waits for their `done`). Only bound.until counts; `done` must not
  // block.
  using TxnDone = std::function<void(etcdserverpb::TxnResponse, std::exception_ptr)>;
  void txn_async(etcdserverpb::TxnRequest request, Clock::time_point until, TxnDone done);
  // A new lease of `ttl_seconds`; the response's TTL may be more (the server's minimum).
  etcdserverpb::LeaseGrantResponse lease_grant(std::int64_t ttl_seconds, Sent* sent = nullptr);
  // Revokes a lease and deletes its keys; a lease that no longer exists counts as revoked.
  void lease_revoke(std::int64_t id, const Bound& bound = {});

  // One keep-alive of every lease in `ids`, over one LeaseKeepAlive stream, answered
  // within `timeout`. Per id, the TTL the server renewed it for (<= 0: the lease is
  // gone). Throws Error when the round could not be completed on any member.
  std::vector<std::int64_t> keep_alive(std::span<const std::int64_t> ids,
                                       std::chrono::milliseconds timeout, Sent* sent);

  // Watches `key` from `start_revision` on for its deletion, on the current member
  // (which must have a leader). Returns deleted when the key was deleted (or the watch
  // revision was compacted away, so the caller must look again); otherwise returns at
  // `until`, when `stop` is requested, or when the watch failed (the member was moved
  // on from), without saying which: the caller looks again either way.
  // With `range_end`, watches every key in [key, range_end) and returns at the first
  // deletion of any.
  enum class WatchEnd { deleted, other };
  WatchEnd wait_for_delete(const std::string& key, std::int64_t start_revision,
                           Clock::time_point until, std::stop_token stop,
                           const std::string& range_end = {});

  // Watches every key in [key, range_end) from `start_revision` on for any change (a
  // put or a delete), on the current member like wait_for_delete. Returns the revision
  // to watch from next: past the last change seen when one came (or the compaction
  // revision, when `start_revision` was compacted away: the caller must look again);
  // nullopt when none came by `until` or `stop`, or the watch failed (then `failed`).
  std::optional<std::int64_t> wait_for_change(const std::string& key, const std::string& range_end,
                                              std::int64_t start_revision, Clock::time_point until,
                                              std::stop_token stop, bool& failed);

  // Starts `reactor`'s Watch stream on the current member (a member cut off from the
  // leader cancels its watches rather than keep them silent) and returns that member's
  // index: watch_hub.h's stream. `context` must outlive the stream. Throws Error when
  // the member's credentials are refused.
  using WatchReactor =
      grpc::ClientBidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>;
  std::size_t open_watch(grpc::ClientContext& context, WatchReactor& reactor);
  // The member calls go to now, and the same after failed calls there (the next).
  std::size_t current_member() const { return current_.load(std::memory_order_relaxed) % members_.size(); }
  void move_on_from(std::size_t index);

  // "member 127.0.0.1:2379", for error messages.
  std::string describe_current() const;

 private:
  struct Member;
  class Failover;
  struct AsyncTxn;
  using Body = std::function<grpc::Status(Member& member, grpc::ClientContext& context)>;

  // Runs `body` on the current member with a deadline `timeout` away, moving on to the
  // next member on a transient failure (see above); throws the last error when every
  // member failed.
  void with_failover(const char* what, std::chrono::milliseconds timeout, const Body& body,
                     Sent* sent = nullptr, const Bound& bound = {});
  // Adds the member's auth token to `context`, authenticating first if it has none.
  grpc::Status authorize(Member& member, grpc::ClientContext& context, Clock::time_point deadline);
  // The next attempt of an asynchronous call, or its end.
  void step(const std::shared_ptr<AsyncTxn>& call);
  void answered(const std::shared_ptr<AsyncTxn>& call, const grpc::Status& status);
  void finish(const std::shared_ptr<AsyncTxn>& call, std::exception_ptr error);
  // One watch stream over [key, range_end) from `start_revision`, read until `done`
  // (given each response) says so, `until`, or `stop`. false if the stream failed
  // transiently (the next call goes to another member) or could not be opened.
  bool watch_stream(const std::string& key, const std::string& range_end,
                    std::int64_t start_revision, bool deletes_only, Clock::time_point until,
                    const std::stop_token& stop,
                    const std::function<bool(const etcdserverpb::WatchResponse&)>& done);
  void ping_members();  // ping() without the explanation

  EtcdConfig config_;
  std::vector<std::unique_ptr<Member>> members_;
  std::atomic<std::size_t> current_{0};

  // The asynchronous calls under way, which the destructor cancels and waits for.
  std::mutex async_mu_;
  std::set<std::shared_ptr<AsyncTxn>> in_flight_;  // guarded by async_mu_
  bool closing_ = false;                           // guarded by async_mu_
  // Every AsyncTxn not yet destroyed, which the destructor waits for (in_flight_ is
  // what it cancels). One answered may still be held by the gRPC thread that ran its
  // callback; its ClientContext holds the member's channel, and gRPC must not see the
  // last channel go on its own callback thread (it frees its callback queue there twice).
  core::InFlight calls_alive_;
};

}  // namespace warden::engines::etcd
