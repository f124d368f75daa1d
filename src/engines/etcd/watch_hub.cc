#include "engines/etcd/watch_hub.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_callback.h>

#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "warden/error.h"

namespace warden::engines::etcd {

// gRPC's reactor for one Watch call, alive from its start until gRPC says it is done;
// its state is guarded by the hub's lock.
class WatchHub::Stream final : public EtcdRpc::WatchReactor {
 public:
  explicit Stream(WatchHub& hub) : alive_(hub.streams_alive_), hub_(hub) {}

  // Starts the call on the current member; throws Error as EtcdRpc::open_watch. Called
  // with the lock held.
  void start(std::shared_ptr<Stream> self) {
    member_ = hub_.rpc_.open_watch(context_, *this);
    self_ = std::move(self);
    StartRead(&response_);
  }

  bool usable(std::size_t member) const { return !ended_ && !ending_ && member_ == member; }
  // Ends the call; OnDone fires what it carried. With the lock held.
  void end() {
    if (ended_ || ending_) return;
    ending_ = true;
    context_.TryCancel();
  }

  // With the lock held: asks the server to answer on the stream (a progress request,
  // answered whatever the watches see), unless an ask is unanswered already; ends the
  // stream when one has been unanswered for `patience`. Nothing without watches.
  void probe(Clock::duration patience, Clock::time_point now) {
    if (ended_ || ending_ || (creates_.empty() && by_server_.empty())) return;
    if (asked_) {
      if (now - *asked_ >= patience) end();  // frozen, or its connection gone silent
      return;
    }
    asked_ = now;
    etcdserverpb::WatchRequest request;
    request.mutable_progress_request();
    send(std::move(request));
  }

  // With the lock held: asks the server for watch `id`.
  void create(std::uint64_t id, const std::string& key, const std::string& range_end,
              std::int64_t start_revision) {
    etcdserverpb::WatchRequest request;
    auto* create = request.mutable_create_request();
    create->set_key(key);
    if (!range_end.empty()) create->set_range_end(range_end);
    create->set_start_revision(start_revision);
    create->add_filters(etcdserverpb::WatchCreateRequest::NOPUT);
    creates_.push_back(id);
    send(std::move(request));
  }

  // With the lock held: the watch `id` is no longer wanted.
  void cancel(std::uint64_t id) {
    for (auto it = by_server_.begin(); it != by_server_.end(); ++it) {
      if (it->second != id) continue;
      send_cancel(it->first);
      by_server_.erase(it);
      return;
    }
    // Not numbered yet: cancelled once its number comes (OnReadDone).
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    std::vector<WatchHub::Fired> to_call;
    {
      std::lock_guard lock(hub_.mu_);
      asked_.reset();  // the member answers on this stream
      handle(response_, to_call);
      StartRead(&response_);
    }
    for (auto& fired : to_call) fired();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(hub_.mu_);
    outbox_.pop_front();
    if (ok && !outbox_.empty()) {
      StartWrite(&outbox_.front());
    } else {
      writing_ = false;  // not ok: the stream ended, OnDone follows
    }
  }

  void OnDone(const grpc::Status& status) override {
    // Destroyed last, after what it carried was called: the stream goes with it, and
    // the hub's destructor may return once it has (WatchHub::streams_alive_).
    std::shared_ptr<Stream> self;
    std::vector<WatchHub::Fired> to_call;
    {
      std::lock_guard lock(hub_.mu_);
      ended_ = true;
      for (auto it = hub_.watches_.begin(); it != hub_.watches_.end();) {
        if (it->second.stream != this) {
          ++it;
          continue;
        }
        to_call.push_back(std::move(it->second.fired));
        it = hub_.watches_.erase(it);
      }
      // Down, cut off or gone silent: the next calls go to the next member, as the
      // blocking watch's failure moves them.
      if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
          status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        hub_.rpc_.move_on_from(member_);
      }
      if (hub_.stream_.get() == this) hub_.stream_.reset();
      self = std::move(self_);
    }
    for (auto& fired : to_call) fired();
  }

 private:
  void send(etcdserverpb::WatchRequest request) {
    outbox_.push_back(std::move(request));
    if (writing_) return;
    writing_ = true;
    StartWrite(&outbox_.front());
  }
  void send_cancel(std::int64_t server_id) {
    etcdserverpb::WatchRequest request;
    request.mutable_cancel_request()->set_watch_id(server_id);
    send(std::move(request));
  }

  // Takes the `fired` of watch `id` if it is still this stream's.
  void fire(std::uint64_t id, std::vector<WatchHub::Fired>& to_call) {
    const auto it = hub_.watches_.find(id);
    if (it == hub_.watches_.end() || it->second.stream != this) return;
    to_call.push_back(std::move(it->second.fired));
    hub_.watches_.erase(it);
  }

  void handle(const etcdserverpb::WatchResponse& response, std::vector<WatchHub::Fired>& to_call) {
    const std::int64_t server_id = response.watch_id();
    if (response.created()) {
      if (creates_.empty()) return;  // not ours to number
      const std::uint64_t id = creates_.front();
      creates_.pop_front();
      // Refused (a compacted revision, a range the user may not read): look again.
      if (response.canceled() || server_id < 0) {
        fire(id, to_call);
        return;
      }
      const auto it = hub_.watches_.find(id);
      if (it == hub_.watches_.end() || it->second.stream != this) {
        send_cancel(server_id);  // unwatched before it was numbered
        return;
      }
      by_server_[server_id] = id;
      return;
    }
    const auto found = by_server_.find(server_id);
    if (found == by_server_.end()) return;  // cancelled by us
    bool ends = response.canceled() || response.compact_revision() > 0;
    for (const auto& event : response.events()) {
      if (event.type() == mvccpb::Event::DELETE) ends = true;
    }
    if (!ends) return;
    const std::uint64_t id = found->second;
    by_server_.erase(found);
    if (!response.canceled()) send_cancel(server_id);
    fire(id, to_call);
  }

  // First, so destroyed last: counted until its context (and channel) are gone.
  core::InFlight::Token alive_;
  WatchHub& hub_;
  grpc::ClientContext context_;
  std::size_t member_ = 0;
  etcdserverpb::WatchResponse response_;
  // Guarded by the hub's mu_:
  std::deque<etcdserverpb::WatchRequest> outbox_;  // the front one is being written
  bool writing_ = false;
  std::deque<std::uint64_t> creates_;               // awaiting their server number
  std::map<std::int64_t, std::uint64_t> by_server_;  // server number → id
  bool ended_ = false;
  bool ending_ = false;                       // end() was called
  std::optional<Clock::time_point> asked_;    // an unanswered probe's time
  std::shared_ptr<Stream> self_;  // held from start() to OnDone
};

WatchHub::WatchHub(EtcdRpc& rpc) : rpc_(rpc) {}

WatchHub::~WatchHub() {
  std::unique_lock lock(mu_);
  watches_.clear();  // nothing is told any more
  if (stream_) stream_->end();  // every other stream was ended when it was replaced
  stream_.reset();
  lock.unlock();
  // Each stream holds itself until gRPC's OnDone, and is let go on the thread that ran
  // it: wait until every one is gone.
  streams_alive_.wait_idle();
}

std::uint64_t WatchHub::watch_delete(const std::string& key, const std::string& range_end,
                                     std::int64_t start_revision, Fired fired) {
  std::unique_lock lock(mu_);
  const std::uint64_t id = ++next_id_;
  if (!stream_ || !stream_->usable(rpc_.current_member())) {
    // On a member the calls have left: its watches look again, on the current one.
    if (stream_) stream_->end();
    auto stream = std::make_shared<Stream>(*this);
    try {
      stream->start(stream);
    } catch (const Error&) {
      lock.unlock();
      fired();  // the waiter's next look says what is wrong
      return id;
    }
    stream_ = std::move(stream);
  }
  watches_.emplace(id, Entry{std::move(fired), stream_.get()});
  stream_->create(id, key, range_end, start_revision);
  return id;
}

void WatchHub::probe(Clock::duration patience) {
  std::lock_guard lock(mu_);
  if (stream_) stream_->probe(patience, Clock::now());
}

void WatchHub::unwatch(std::uint64_t id) {
  std::lock_guard lock(mu_);
  const auto it = watches_.find(id);
  if (it == watches_.end()) return;
  const Stream* stream = it->second.stream;
  watches_.erase(it);
  if (stream_ && stream_.get() == stream) stream_->cancel(id);
}

}  // namespace warden::engines::etcd
