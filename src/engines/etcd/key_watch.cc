#include "engines/etcd/key_watch.h"

#include <string>
#include <utility>

#include "engines/etcd/lock_keys.h"

namespace warden::engines::etcd {

namespace {

class EtcdKeyWatch final : public core::KeyWatch {
 public:
  EtcdKeyWatch(std::shared_ptr<EtcdRpc> rpc, std::string begin, std::string end,
               std::int64_t next_revision)
      : rpc_(std::move(rpc)),
        begin_(std::move(begin)),
        end_(std::move(end)),
        next_revision_(next_revision) {}

  bool wait(Clock::time_point until, const std::stop_token& stop) override {
    if (broken_) return false;
    bool failed = false;
    const auto next = rpc_->wait_for_change(begin_, end_, next_revision_, until, stop, failed);
    if (failed) {
      broken_ = true;  // reopened by the caller, from the revision it then reads
      return false;
    }
    if (!next) return false;
    next_revision_ = *next;
    return true;
  }

  bool broken() const override { return broken_; }

 private:
  const std::shared_ptr<EtcdRpc> rpc_;
  const std::string begin_;
  const std::string end_;
  std::int64_t next_revision_;
  bool broken_ = false;
};

}  // namespace

std::unique_ptr<core::KeyWatch> open_key_watch(std::shared_ptr<EtcdRpc> rpc, const LockKeys& keys) {
  etcdserverpb::RangeRequest request;
  request.set_key(keys.lock);
  request.set_range_end(prefix_end(keys.lock));
  request.set_count_only(true);
  const auto response = rpc->range(request);
  return std::make_unique<EtcdKeyWatch>(std::move(rpc), keys.lock, prefix_end(keys.lock),
                                        response.header().revision() + 1);
}

}  // namespace warden::engines::etcd
