// engines/zookeeper/zk_session.h — one ZooKeeper session through the C client
// (libzookeeper_mt, THREADED): connect, digest auth, the session's state, and the few
// asynchronous calls the engine makes, each answered as a future.
//
// Calls are asynchronous so that several can be in flight at once: ZooKeeper answers a
// session's requests in the order they were sent, so a create and a getChildren sent
// back to back cost one round trip, and the getChildren sees the create.
//
// The C client runs two threads of its own (I/O and completions). Completions and
// watch events arrive on its completion thread; they only fulfil promises and call the
// Listener, which must not block.
//
// States (the global watcher's session events):
//   connected  — requests flow;
//   suspended  — the connection is lost; the client reconnects to some server of the
//                ensemble, and the session may still be alive (ZOO_CONNECTING_STATE);
//   expired    — the session is gone with its ephemeral nodes (or auth failed, or the
//                session was closed); a new ZkSession is needed.
#pragma once

#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engines/zookeeper/zk_config.h"
#include "warden/types.h"

namespace warden::engines::zookeeper {

enum class SessionState { connected, suspended, expired };

class ZkSession;

// Told of state changes and of watched nodes that changed (from the C client's thread).
class SessionListener {
 public:
  virtual ~SessionListener() = default;
  virtual void on_state(const ZkSession& session, SessionState state) = 0;
  virtual void on_node_event(const std::string& path) = 0;
};

struct CreateResult {
  int rc = ZOK;
  std::string path;  // the created node (with its sequence suffix)
  std::int64_t czxid = 0;
};

struct ChildrenResult {
  int rc = ZOK;
  std::vector<std::string> children;  // names, not paths
};

struct ExistsResult {
  int rc = ZOK;  // ZOK: exists; ZNONODE: does not
  std::int64_t czxid = 0;
};

struct GetResult {
  int rc = ZOK;  // ZOK: read; ZNONODE: no such node
  std::string data;
  std::int64_t czxid = 0;
  std::int32_t version = 0;  // of the data, for a conditional set
};

class ZkSession {
 public:
  // Connects to `config.hosts`, waits for the session (up to op_timeout) and adds the
  // digest credentials. Throws Error: unavailable / deadline_exceeded if no server
  // answers, permission_denied if the credentials are refused.
  ZkSession(const ZkConfig& config, SessionListener* listener);
  ~ZkSession();  // closes the session: its ephemeral nodes go at once
  ZkSession(const ZkSession&) = delete;
  ZkSession& operator=(const ZkSession&) = delete;

  SessionState state() const;
  // Waits up to `timeout` for the state to leave `suspended`; returns the state then.
  SessionState wait_while_suspended(std::chrono::milliseconds timeout) const;
  // The session's id (stable across reconnects).
  std::int64_t id() const;
  // The timeout the server granted; ephemeral nodes outlive a silent client this long.
  std::chrono::milliseconds timeout() const;
  // The ACL new nodes get: creator-only (plus read for all) with credentials, open
  // without.
  const ACL_vector* acl() const;

  // Each call below that gives a future also comes with `done`, called once with the
  // result on the C client's thread (ZCLOSING if the session closes first), or at once
  // with the code it failed with if it could not be sent. `done` must not block.
  std::future<CreateResult> create(const std::string& path, const std::string& value, int mode);
  void create(const std::string& path, const std::string& value, int mode,
              std::function<void(CreateResult)> done);
  // With `watch`, the next change of `path`'s children (a child created or deleted)
  // reaches the listener as an event on `path`.
  std::future<ChildrenResult> children(const std::string& path, bool watch = false);
  void children(const std::string& path, bool watch, std::function<void(ChildrenResult)> done);
  // Makes the connected server catch up with the leader (ZooKeeper's sync): a read sent
  // after it on this session sees every write committed before it, whoever made it.
  // Reads are otherwise only as fresh as the server this session happens to use.
  std::future<int> sync(const std::string& path);
  // With `watch`, a later change of `path` (deleted, created, changed) is reported once
  // to the listener's on_node_event.
  std::future<ExistsResult> exists(const std::string& path, bool watch);
  void exists(const std::string& path, bool watch, std::function<void(ExistsResult)> done);
  std::future<int> remove(const std::string& path);
  void remove(const std::string& path, std::function<void(int)> done);
  // The node's data and stat, without a watch.
  std::future<GetResult> get(const std::string& path);
  // Replaces the node's data if its data version is still `version` (ZBADVERSION
  // otherwise, ZNONODE if it is gone).
  std::future<int> set(const std::string& path, const std::string& data, std::int32_t version);

  // Waits for `future` up to op_timeout; throws Error(deadline_exceeded) after that.
  template <class T>
  T await(std::future<T> future) const;

 private:
  static void on_watch(zhandle_t* zh, int type, int state, const char* path, void* context);
  void set_state(SessionState state);

  const ZkConfig config_;
  SessionListener* const listener_;
  mutable std::mutex mu_;
  SessionState state_ = SessionState::suspended;  // guarded by mu_
  mutable std::condition_variable changed_;
  zhandle_t* handle_ = nullptr;
  // Creator-all ("auth" scheme: the session's own credentials) and world-read.
  ACL acl_entries_[2]{};
  ACL_vector acl_{};
};

// Throws the warden::Error for a ZooKeeper return code (rc != ZOK) of `what`.
[[noreturn]] void throw_zk_error(int rc, const std::string& what);

// A call's code for a connection lost or not answering: the session may live on, and
// what the call did is not known.
inline bool is_connection_error(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED;
}

template <class T>
T ZkSession::await(std::future<T> future) const {
  if (future.wait_for(config_.op_timeout) != std::future_status::ready) {
    throw_zk_error(ZOPERATIONTIMEOUT, "waiting for ZooKeeper");
  }
  return future.get();
}

}  // namespace warden::engines::zookeeper
