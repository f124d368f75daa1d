#include "bench/etcd_baseline.h"

#include <grpcpp/grpcpp.h>

#include "core/uri.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "v3lockpb/v3lock.grpc.pb.h"
#include "warden/error.h"

namespace warden::bench {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kEtcdKeyPrefix = "warden-bench/";

void check(const grpc::Status& status, const std::string& what, const std::string& target) {
  if (status.ok()) return;
  const Errc code = status.error_code() == grpc::StatusCode::UNAVAILABLE ? Errc::unavailable
                    : status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                        ? Errc::deadline_exceeded
                        : Errc::internal;
  throw Error(code, what + " on etcd " + target + ": " + status.error_message());
}

class EtcdCycleClient final : public CycleClient {
 public:
  EtcdCycleClient(const std::string& target, std::vector<std::string> names,
                  const Workload& workload, int index, std::chrono::milliseconds timeout)
      : target_(target),
        channel_(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())),
        locks_(v3lockpb::Lock::NewStub(channel_)),
        leases_(etcdserverpb::Lease::NewStub(channel_)),
        names_(std::move(names)),
        ttl_(workload.ttl),
        timeout_(timeout),
        next_(static_cast<std::size_t>(index) % names_.size()) {
    etcdserverpb::LeaseGrantRequest request;
    request.set_ttl(std::max<std::int64_t>(1, (ttl_.count() + 999) / 1000));
    etcdserverpb::LeaseGrantResponse response;
    auto context = call_context(Clock::now() + timeout_);
    check(leases_->LeaseGrant(context.get(), request, &response), "LeaseGrant", target_);
    lease_ = response.id();
    renewed_ = Clock::now();
  }

  std::optional<std::chrono::nanoseconds> cycle(const std::stop_token& stop) override {
    if (Clock::now() - renewed_ > ttl_ / 3) keep_alive();
    const std::string& name = names_[next_];
    if (++next_ == names_.size()) next_ = 0;

    v3lockpb::LockRequest lock;
    lock.set_name(name);
    lock.set_lease(lease_);
    v3lockpb::LockResponse locked;
    const auto t0 = Clock::now();
    // Lock blocks in the server while the lock is taken: no deadline beyond the run's.
    auto context = call_context(Clock::now() + std::chrono::hours(1));
    std::stop_callback cancel(stop, [&context] { context->TryCancel(); });
    const grpc::Status status = locks_->Lock(context.get(), lock, &locked);
    if (status.error_code() == grpc::StatusCode::CANCELLED && stop.stop_requested()) {
      return std::nullopt;
    }
    check(status, "Lock", target_);
    const auto t1 = Clock::now();

    v3lockpb::UnlockRequest unlock;
    unlock.set_key(locked.key());
    v3lockpb::UnlockResponse unlocked;
    auto unlock_context = call_context(Clock::now() + timeout_);
    check(locks_->Unlock(unlock_context.get(), unlock, &unlocked), "Unlock", target_);
    return t1 - t0;
  }

 private:
  static std::unique_ptr<grpc::ClientContext> call_context(Clock::time_point deadline) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + (deadline - Clock::now()));
    return context;
  }

  void keep_alive() {
    auto context = call_context(Clock::now() + timeout_);
    auto stream = leases_->LeaseKeepAlive(context.get());
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(lease_);
    etcdserverpb::LeaseKeepAliveResponse response;
    if (stream->Write(request) && stream->Read(&response) && response.ttl() > 0) {
      renewed_ = Clock::now();
    }
    stream->WritesDone();
    context->TryCancel();
    stream->Finish();
  }

  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v3lockpb::Lock::Stub> locks_;
  std::unique_ptr<etcdserverpb::Lease::Stub> leases_;
  std::vector<std::string> names_;
  std::chrono::milliseconds ttl_;
  std::chrono::milliseconds timeout_;
  std::size_t next_;
  std::int64_t lease_ = 0;
  Clock::time_point renewed_;
};

}  // namespace

std::vector<std::unique_ptr<CycleClient>> open_etcd_clients(const std::string& url,
                                                            const Workload& workload,
                                                            std::chrono::milliseconds timeout) {
  const core::Uri uri = core::Uri::parse(url);
  if (uri.scheme != "etcd" || uri.hosts.empty()) {
    throw Error(Errc::invalid_argument, "--baseline needs an etcd://HOST:PORT URL");
  }
  if (uri.user || uri.password) {
    throw Error(Errc::invalid_argument, "the etcd baseline does not support auth");
  }
  const std::string target =
      uri.hosts.front().host + ':' + std::to_string(uri.hosts.front().port.value_or(2379));
  std::vector<std::unique_ptr<CycleClient>> clients;
  for (int i = 0; i < workload.clients; ++i) {
    std::vector<std::string> names;
    for (int k = 0; k < workload.keys; ++k) names.push_back(kEtcdKeyPrefix + lock_name(workload, i, k));
    clients.push_back(
        std::make_unique<EtcdCycleClient>(target, std::move(names), workload, i, timeout));
  }
  return clients;
}

}  // namespace warden::bench
