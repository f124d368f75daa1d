// core/watch_revokes.h — lock caching's revokes on an engine whose backend cannot push
// them (etcd://, zk://, redis://), from what it can do: watch a lock's requests
// (Engine::watch_requests; on redis://, the lock's channel, where a refused request
// publishes that it asks).
//
// Each cacheable grant gets a watch on its lock and a thread that waits on it, from the
// grant until it ends. The first thing the thread does is look (Engine::inspect) for a
// request already waiting; after that, any change of the lock's requests is another
// client asking (a renewal changes nothing there, and this client's own next request
// waits until its grant is given back): the thread reports a revoke and ends. It also
// ends when the grant is given back or the client closes. A watch that breaks is opened
// again and the lock looked at again, so no request is missed meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/engine.h"

namespace warden::core {

class WatchRevokes {
 public:
  WatchRevokes(std::shared_ptr<Engine> engine, Engine::RevokeSink on_revoke,
               std::chrono::milliseconds retry);
  // Stops every watch (their threads end within the engine's op_timeout).
  ~WatchRevokes();
  WatchRevokes(const WatchRevokes&) = delete;
  WatchRevokes& operator=(const WatchRevokes&) = delete;

  // Watches for requests on `grant`'s lock until it is revoked or stop(grant) is called.
  void start(const GrantRef& grant);
  // The grant ended (given back, released, lost): its watch is no longer needed. Never
  // blocks: the watch's thread ends by itself and is joined later.
  void stop(const GrantRef& grant);

 private:
  using Id = std::pair<std::string, std::uint64_t>;  // ("group/name", token)
  void watch(const GrantRef& grant, const std::stop_token& stop);
  // Requires mu_: joins the threads that have ended on their own.
  void reap();

  const std::shared_ptr<Engine> engine_;
  const Engine::RevokeSink on_revoke_;
  const std::chrono::milliseconds retry_;

  std::mutex mu_;
  std::map<Id, std::jthread> watches_;  // guarded by mu_
  std::map<Id, bool> ended_;            // guarded by mu_: threads done, to be reaped
};

}  // namespace warden::core
