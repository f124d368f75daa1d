// engines/etcd/watch_hub.h — every asynchronous wait's watch of one etcd:// Client on one
// Watch stream (async_waits.h), as etcd's own client multiplexes its watchers: a watch
// costs a create request and an id on the stream, not a stream or a thread.
//
// A watch looks for the first deletion in [key, range_end) (or of `key` alone) from a
// revision on, and fires once: at that deletion, or when the watch cannot say (its start
// revision was compacted away, the member cancelled it, the stream ended); the waiter
// looks again either way, as the blocking wait does after any wake-up. The server numbers
// a stream's watches in the order their creates arrive, so each create waits in a queue
// for its number.
//
// The stream is opened on the member calls go to (EtcdRpc::current_member), and moved
// when that member changed: a new watch finds the stream on a member its calls left (down,
// frozen, cut off, leaderless), so it ends that stream (firing its watches) and opens one
// on the current member. A member that is cut off from the leader cancels the stream's
// watches ("hasleader"). A frozen member, or a connection gone silent, says nothing: the
// owner probes the stream now and then (probe(): a progress request, which the member
// answers on the stream), and a probe unanswered for its patience ends the stream, so
// its watches look again elsewhere, one probe per Client rather than a poll per watch.
//
// Thread safety: every method may be called from any thread. `fired` is called on a gRPC
// thread, outside the hub's lock, and must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/in_flight.h"
#include "engines/etcd/etcd_rpc.h"

namespace warden::engines::etcd {

class WatchHub {
 public:
  explicit WatchHub(EtcdRpc& rpc);
  // Ends the stream and waits until gRPC is done with it; no `fired` after it returns.
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  using Fired = std::function<void()>;
  // Watches for the first deletion of `key` (with `range_end`: of any key in [key,
  // range_end)) from `start_revision` on. Returns the watch's id. If the stream cannot
  // be opened (the member refused the credentials) `fired` is called at once.
  std::uint64_t watch_delete(const std::string& key, const std::string& range_end,
                             std::int64_t start_revision, Fired fired);
  // Asks the stream's member for an answer if it carries watches; ends the stream (firing
  // its watches) if an earlier ask has gone unanswered for `patience`.
  void probe(Clock::duration patience);
  // Ends the watch `id` if it has not fired. Its `fired` is not called after this returns,
  // unless it was being called already: a late `fired` must be harmless.
  void unwatch(std::uint64_t id);

 private:
  class Stream;
  struct Entry {
    Fired fired;
    const Stream* stream = nullptr;  // the stream its create went to
  };

  EtcdRpc& rpc_;
  // One lock for the hub and its streams.
  std::mutex mu_;
  std::unordered_map<std::uint64_t, Entry> watches_;  // not fired yet, by id; guarded by mu_
  std::shared_ptr<Stream> stream_;                    // the one new watches go to; guarded by mu_
  // Streams not yet destroyed, which the destructor waits for. Each holds its member's
  // channel (its ClientContext), and gRPC must not see the last channel go on its own
  // callback thread (it frees its callback queue there twice).
  core::InFlight streams_alive_;
  std::uint64_t next_id_ = 0;                         // guarded by mu_
};

}  // namespace warden::engines::etcd
