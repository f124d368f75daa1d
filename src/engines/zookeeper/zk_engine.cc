#include "engines/zookeeper/zk_engine.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/client_id.h"
#include "core/in_flight.h"
#include "engines/resp_client/backoff.h"
#include "engines/zookeeper/async_waits.h"
#include "engines/zookeeper/lock_nodes.h"
#include "engines/zookeeper/zk_config.h"
#include "engines/zookeeper/zk_session.h"
#include "warden/error.h"

namespace warden::engines::zookeeper {
namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;
using std::chrono::milliseconds;

// GrantRef::owner of a zk grant: "SESSION_ID PATH".
std::string owner_of(std::int64_t session, const std::string& path) {
  return std::to_string(session) + ' ' + path;
}

struct Owner {
  std::int64_t session = 0;
  std::string path;
};

Owner parse_owner(const std::string& owner) {
  Owner out;
  const auto space = owner.find(' ');
  if (space == std::string::npos ||
      std::from_chars(owner.data(), owner.data() + space, out.session).ec != std::errc()) {
    throw Error(Errc::not_owner, "not a grant of a zk:// client: '" + owner + "'");
  }
  out.path = owner.substr(space + 1);
  return out;
}

class ZkEngine final : public core::Engine, public SessionListener, public AsyncWaits::Host {
 public:
  explicit ZkEngine(ZkConfig config)
      : config_(std::move(config)),
        client_id_(core::random_client_id()),
        waits_(AsyncWaits::start(*this, config_, client_id_)) {
    session_ = std::make_shared<ZkSession>(config_, this);
    maintainer_ = std::jthread([this](std::stop_token stop) { maintain(std::move(stop)); });
  }

  ~ZkEngine() override {
    waits_->stop();  // it uses this engine until then
    std::thread opener;
    {
      std::lock_guard lock(opener_mu_);
      opener = std::move(opener_);
    }
    if (opener.joinable()) opener.join();  // a connect: op_timeout at most
    settle_releases();                     // their completions use this engine
    maintainer_.request_stop();
    if (maintainer_.joinable()) maintainer_.join();
    std::shared_ptr<ZkSession> session;
    {
      std::lock_guard lock(mu_);
      session = std::move(session_);
    }
    session.reset();  // closes it: every node of this client goes at once
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.shared = true;
    caps.fair = true;
    caps.non_fair = false;    // the sequence order is the queue
    caps.lock_delay = false;  // see docs/engines/zookeeper.md
    caps.fencing = true;
    caps.durable_tokens = true;  // zxids survive restarts and leader elections
    caps.check = true;
    // layout=curator names only what Curator's and kazoo's locks know: no p- nodes, and
    // no elections (their candidates would be Curator lock nodes others read as locks).
    const bool own_layout = config_.layout == Layout::warden;
    caps.semaphore = own_layout;  // p- nodes that count permits (lock_nodes.h)
    caps.election = own_layout;   // the candidate's value in its node's data
    caps.watch = true;            // children and data watches on the lock (KeyWatchOnLock)
    caps.cache = true;            // revokes by those watches (core/watch_revokes.h)
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    const LockNodes nodes = nodes_for(request);
    bool moved = false;
    while (true) {
      const std::shared_ptr<ZkSession> session = current_session();
      // A fresh GUID per attempt: after a lost session the old node is gone for good.
      const std::string guid = next_guid();
      Created created;
      try {
        created = create(*session, nodes, request, guid);
      } catch (const Error&) {
        // The session expired before we learnt it: its node (if any) went with it;
        // once more on a new session.
        if (session->state() == SessionState::expired && !moved) {
          moved = true;
          continue;
        }
        withdraw_later(session->id(), nodes.lock, guid, "");
        throw;
      }
      if (created.recreated) withdraw_later(session->id(), nodes.lock, guid, "", created.path);
      bool session_lost = false;
      std::optional<Granted> granted;
      try {
        granted = wait(request, *session, nodes, created, session_lost);
      } catch (const Error&) {
        withdraw(*session, nodes.lock, guid, created.path);
        throw;
      }
      if (granted) return granted;
      if (!session_lost) {
        withdraw(*session, nodes.lock, guid, created.path);
        return std::nullopt;
      }
      if (request.stop.stop_requested() || Clock::now() >= request.deadline) return std::nullopt;
    }
  }

  // Waits on the engine's one waits thread (async_waits.h), without a thread each.
  void acquire_async(AcquireRequest request, AcquireDone done) override {
    LockNodes nodes;
    try {
      nodes = nodes_for(request);
    } catch (...) {
      done(std::nullopt, std::current_exception());
      return;
    }
    waits_->acquire(std::move(request), std::move(nodes), std::move(done));
  }
  bool waits_without_threads() const override { return true; }

  std::vector<Renewed> renew(std::span<const GrantRef> grants) override {
    std::vector<Renewed> out(grants.size());
    const std::shared_ptr<ZkSession> session = live_session();
    if (!session) return out;  // expired: every grant went with it
    if (session->state() == SessionState::suspended && config_.lose_on_suspend) return out;
    const std::int64_t id = session->id();
    const auto sent = Clock::now();
    std::vector<std::optional<std::future<ExistsResult>>> pending(grants.size());
    for (std::size_t i = 0; i < grants.size(); ++i) {
      const Owner owner = parse_owner(grants[i].owner);
      if (owner.session == id) pending[i] = session->exists(owner.path, false);
    }
    const milliseconds lease = session->timeout();
    for (std::size_t i = 0; i < grants.size(); ++i) {
      if (!pending[i]) continue;
      const ExistsResult result = session->await(std::move(*pending[i]));
      if (result.rc == ZNONODE) continue;
      if (result.rc != ZOK) throw_zk_error(result.rc, "renew on " + config_.hosts);
      if (static_cast<std::uint64_t>(result.czxid) == grants[i].token) {
        const auto expires = sent + std::min(grants[i].ttl, lease);
        std::lock_guard lock(mu_);
        const auto it = expiring_.find(parse_owner(grants[i].owner).path);
        if (it == expiring_.end()) continue;  // expired and deleted meanwhile: not renewed
        it->second = std::max(it->second, expires);
        out[i].expires = expires;
      }
    }
    return out;
  }

  void release(const GrantRef& grant) override {
    const Owner owner = parse_owner(grant.owner);
    {
      std::lock_guard lock(mu_);
      forget(owner.path);
    }
    const std::shared_ptr<ZkSession> session = live_session();
    if (!session || session->id() != owner.session) return;  // gone with its session
    const int rc = session->await(session->remove(owner.path));
    if (rc != ZOK && rc != ZNONODE) throw_zk_error(rc, "release of " + owner.path);
  }

  // The same delete, answered later. The session orders it before any later request of
  // this client, so a new request node for the lock is created after it is gone.
  void release_async(const GrantRef& grant, ReleaseDone done) override {
    const Owner owner = parse_owner(grant.owner);
    {
      std::lock_guard lock(mu_);
      forget(owner.path);
    }
    const std::shared_ptr<ZkSession> session = live_session();
    if (!session || session->id() != owner.session) {  // gone with its session
      done(nullptr);
      return;
    }
    releases_.begin();
    session->remove(owner.path, [this, path = owner.path, done = std::move(done)](int rc) {
      std::exception_ptr error;
      if (rc != ZOK && rc != ZNONODE) {
        try {
          throw_zk_error(rc, "release of " + path);
        } catch (...) {
          error = std::current_exception();
        }
      }
      done(error);
      releases_.end();
    });
  }

  // The C client answers every request it took, failing those still pending when its
  // connection is lost (within the session timeout) or the session closes.
  void settle_releases() override { releases_.wait_idle(); }

  bool proclaim(const GrantRef& grant, std::string_view value) override {
    const Owner owner = parse_owner(grant.owner);
    const std::shared_ptr<ZkSession> session = live_session();
    if (!session || session->id() != owner.session) return false;  // gone with its session
    // The node's path alone could name another client's node (a lock node deleted when
    // empty and created again restarts its sequence), so its czxid must be the grant's
    // token, and the set is conditional on the data version read with it.
    const GetResult node = session->await(session->get(owner.path));
    if (node.rc == ZNONODE) return false;
    if (node.rc != ZOK) throw_zk_error(node.rc, "proclaim on " + owner.path);
    if (static_cast<std::uint64_t>(node.czxid) != grant.token) return false;
    const int rc = session->await(
        session->set(owner.path, request_data(grant.mode, client_id_, value), node.version));
    if (rc == ZNONODE || rc == ZBADVERSION) return false;
    if (rc != ZOK) throw_zk_error(rc, "proclaim on " + owner.path);
    return true;
  }

  bool check(const Sequencer& sequencer) override {
    const LockNodes nodes = nodes_of(core::LockKey{sequencer.group, sequencer.name});
    const std::shared_ptr<ZkSession> session = current_session();
    // Another client's grant may be newer than what this session's server has applied:
    // sync first (answered in order, so one round trip for both).
    auto synced = session->sync(nodes.lock);
    auto listed = session->children(nodes.lock);
    const int sync_rc = session->await(std::move(synced));
    const ChildrenResult children = session->await(std::move(listed));
    if (sync_rc != ZOK && sync_rc != ZNONODE) throw_zk_error(sync_rc, "sync of " + nodes.lock);
    if (children.rc == ZNONODE) return false;
    if (children.rc != ZOK) throw_zk_error(children.rc, "check of " + nodes.lock);
    std::vector<std::future<ExistsResult>> pending;
    for (const std::string& child : children.children) {
      const auto node = parse_request(child, config_.layout);
      if (node && node->mode == sequencer.mode) {
        pending.push_back(session->exists(nodes.lock + '/' + child, false));
      }
    }
    bool found = false;
    for (auto& future : pending) {
      const ExistsResult result = session->await(std::move(future));
      if (result.rc == ZOK && static_cast<std::uint64_t>(result.czxid) == sequencer.token) {
        found = true;
      }
    }
    return found;
  }

  LockStatus inspect(const core::LockKey& key) override {
    const LockNodes nodes = nodes_of(key);  // a name the layout refuses: before any I/O
    return inspect_on(*current_session(), nodes, key);
  }

  std::unique_ptr<core::KeyWatch> watch(const core::LockKey& key) override {
    const LockNodes nodes = nodes_of(key);
    return std::make_unique<KeyWatchOnLock>(*this, nodes.lock);
  }

  std::vector<LockSummary> list(std::string_view group) override {
    return list_on(*current_session(), config_.prefix, config_.layout, group);
  }

  // SessionListener: from the C client's completion thread; never blocks.
  void on_state(const ZkSession& session, SessionState state) override {
    {
      std::lock_guard lock(mu_);
      ++state_changes_;
      const bool lose = state == SessionState::expired ||
                        (state == SessionState::suspended && config_.lose_on_suspend);
      if (lose) {
        const std::int64_t id = session.id();
        for (auto it = held_.begin(); it != held_.end();) {
          if (it->second.session != id) {
            ++it;
            continue;
          }
          to_report_.push_back(it->second.grant);
          // Declared lost while the session may live on: delete the node once the
          // connection is back, so the lock does not stay taken by nobody.
          if (state == SessionState::suspended) {
            withdrawals_.push_back(Withdrawal{id, "", "", it->first});
          }
          expiring_.erase(it->first);
          it = held_.erase(it);
        }
      }
    }
    changed_.notify_all();
    waits_->on_state_change();
  }

  void on_node_event(const std::string& path) override {
    waits_->on_node_event(path);
    {
      std::lock_guard lock(mu_);
      const auto watch = watches_.find(path);
      if (watch == watches_.end()) return;
      ++watch->second.fired;
    }
    changed_.notify_all();
  }

 private:
  // AsyncWaits::Host.
  std::shared_ptr<ZkSession> live_session() override {
    std::lock_guard lock(mu_);
    if (session_ && session_->state() != SessionState::expired) return session_;
    return nullptr;
  }
  // Layout::curator: a UUID, the protection id Curator puts in its own names.
  std::string next_guid() override {
    return config_.layout == Layout::curator ? random_uuid()
                                             : client_id_ + '-' + std::to_string(++counter_);
  }
  std::optional<Granted> grant(const AcquireRequest& request, ZkSession& session,
                               const std::string& path, std::int64_t czxid,
                               Clock::time_point listed_at, bool& session_lost,
                               bool& suspended) override {
    return grant_node(request, session, path, czxid, listed_at, session_lost, suspended);
  }
  void withdraw_later(std::int64_t session, const std::string& lock, const std::string& guid,
                      const std::string& path) override {
    withdraw_later(session, lock, guid, path, "");
  }
  void open_session() override {
    std::lock_guard lock(opener_mu_);
    if (opening_) return;
    opening_ = true;
    if (opener_.joinable()) opener_.join();  // the last one has ended: opening_ was false
    opener_ = std::thread([this] {
      try {
        (void)current_session();
      } catch (const Error&) {
        // Nobody answered: the waits that look for a session ask again.
      }
      {
        std::lock_guard done(opener_mu_);
        opening_ = false;
      }
      waits_->on_state_change();
    });
  }

  // Where the request's lock lives; refuses what the layout cannot hold. Throws
  // Error(invalid_argument, unsupported) before any I/O.
  LockNodes nodes_for(const AcquireRequest& request) const {
    LockNodes nodes = nodes_of(request.key);
    if (config_.layout == Layout::curator && (request.capacity > 0 || !request.value.empty())) {
      throw Error(Errc::unsupported,
                  "zk:// layout=curator has no semaphores or elections: Curator's and kazoo's "
                  "locks would not understand their nodes; use the default layout");
    }
    return nodes;
  }

  struct Created {
    std::string path;
    RequestNode own;
    std::int64_t czxid = 0;
    std::vector<std::string> children;  // listed right after the create
    Clock::time_point sent;             // of the listing
    // Another create of this GUID lost its answer and was not found: it may yet be
    // carried out, as a stray node of this request.
    bool recreated = false;
  };

  struct Held {
    GrantRef grant;
    std::int64_t session = 0;
  };

  // A request node to delete once ZooKeeper can be reached: by `path`, and/or every
  // child of `lock` whose name holds `guid` except `keep` (the request's own node). A
  // create whose answer was lost can be carried out after a listing that did not show it
  // (a session's requests on its next connection can overtake those of the broken one),
  // so the GUID is looked for again, and what it finds deleted, until `look_until`, a
  // session timeout after it was queued.
  struct Withdrawal {
    std::int64_t session = 0;
    std::string lock;
    std::string guid;
    std::string path;
    Clock::time_point look_until{};
    std::string keep{};
  };

  struct Watch {
    std::uint64_t fired = 0;
    int waiters = 0;
  };

  // Election::observe's watch: a children watch on the lock node (a request node
  // created or deleted) and a data watch on its leader, the request node with the
  // lowest sequence (a proclaim). ZooKeeper watches fire once, so each wait sets them
  // again and compares what it reads then with what the previous wait (or the opening)
  // read: a change between two waits, when no watch was set, is seen that way.
  class KeyWatchOnLock final : public core::KeyWatch {
   public:
    // Reads the lock's state once, without watches. Throws like inspect.
    KeyWatchOnLock(ZkEngine& engine, std::string lock) : engine_(engine), lock_(std::move(lock)) {
      seen_ = read(*engine_.current_session(), /*arm=*/false);
    }

    bool wait(Clock::time_point until, const std::stop_token& stop) override {
      if (broken_) return false;
      try {
        while (!stop.stop_requested() && Clock::now() < until) {
          const std::shared_ptr<ZkSession> session = engine_.current_session();
          // Registered before the watches are set, so that no event is dropped; the
          // leader's node as last seen (a new leader is a difference in itself).
          const std::vector<std::string> paths = {lock_, leader_path(seen_)};
          std::unique_lock lock(engine_.mu_);
          std::vector<std::uint64_t> fired;
          for (const auto& path : paths) {
            Watch& watch = engine_.watches_[path];
            ++watch.waiters;
            fired.push_back(watch.fired);
          }
          const std::uint64_t changes = engine_.state_changes_;
          lock.unlock();
          bool changed = false;
          bool woken = false;
          try {
            const Seen now = read(*session, /*arm=*/true);
            changed = now != seen_;
            seen_ = now;
          } catch (...) {
            forget(paths);
            throw;
          }
          lock.lock();
          if (!changed) {
            woken = engine_.changed_.wait_until(lock, stop, until, [&] {
              for (std::size_t i = 0; i < paths.size(); ++i) {
                if (engine_.watches_[paths[i]].fired != fired[i]) return true;
              }
              return engine_.state_changes_ != changes;
            });
          }
          lock.unlock();
          forget(paths);
          if (changed) return true;
          if (!woken) return false;
          // Woken: set the watches again and compare (the event may undo itself).
        }
      } catch (const Error&) {
        broken_ = true;  // the caller looks, and opens another after a poll
      }
      return false;
    }

    bool broken() const override { return broken_; }

   private:
    // What the watch compares: the request nodes, and the leader's data version.
    struct Seen {
      std::vector<std::string> children;
      std::string leader;
      std::int32_t version = -1;
      bool operator==(const Seen&) const = default;
    };

    std::string leader_path(const Seen& seen) const {
      return seen.leader.empty() ? lock_ : lock_ + '/' + seen.leader;
    }

    // The children and the leader's data version; with `arm`, sets a children watch on
    // the lock node (an exists watch while it does not exist) and a data watch on the
    // leader. Throws Error for a connection error or a refusal.
    Seen read(ZkSession& session, bool arm) const {
      Seen seen;
      ChildrenResult listed = session.await(session.children(lock_, arm));
      if (listed.rc == ZNONODE && arm) {
        // An exists watch, to hear of the node's creation. A node made since the listing
        // is there already, and its exists watch would tell only of its data or its
        // deletion, never of a child: list it again, which sets the children watch. (If
        // it is gone again by then, the exists watch has fired.)
        const int rc = session.await(session.exists(lock_, true)).rc;
        if (rc == ZOK)
          listed = session.await(session.children(lock_, true));
        else if (rc != ZNONODE)
          throw_zk_error(rc, "watch of " + lock_);
      }
      if (listed.rc == ZNONODE) return seen;
      if (listed.rc != ZOK) throw_zk_error(listed.rc, "list of " + lock_);
      std::sort(listed.children.begin(), listed.children.end());
      seen.children = std::move(listed.children);
      std::optional<RequestNode> first;
      for (const auto& name : seen.children) {
        const auto node = parse_request(name, engine_.config_.layout);
        if (node && (!first || node->sequence < first->sequence)) first = node;
      }
      if (!first) return seen;
      seen.leader = first->name;
      const std::string path = lock_ + '/' + first->name;
      if (arm) {
        const int rc = session.await(session.exists(path, true)).rc;
        if (rc != ZOK && rc != ZNONODE) throw_zk_error(rc, "watch of " + path);
      }
      const GetResult data = session.await(session.get(path));
      if (data.rc == ZOK) {
        seen.version = data.version;
      } else if (data.rc != ZNONODE) {  // gone: the children watch tells
        throw_zk_error(data.rc, "read of " + path);
      }
      return seen;
    }

    void forget(const std::vector<std::string>& paths) {
      std::lock_guard lock(engine_.mu_);
      for (const auto& path : paths) {
        if (--engine_.watches_[path].waiters == 0) engine_.watches_.erase(path);
      }
    }

    ZkEngine& engine_;
    const std::string lock_;
    Seen seen_;
    bool broken_ = false;
  };

  // Where the lock `key` lives. Throws Error(invalid_argument) for a name the layout
  // refuses (lock_nodes.h), before any I/O.
  LockNodes nodes_of(const core::LockKey& key) const {
    return LockNodes::of(config_.layout, config_.prefix, key.group, key.name);
  }

  // The current session, or a new one if it expired. Throws if none can be opened.
  std::shared_ptr<ZkSession> current_session() {
    if (auto session = live_session()) return session;
    std::lock_guard open(open_mu_);
    if (auto session = live_session()) return session;
    // Constructed without mu_: the session reports "connected" while it is built.
    auto session = std::make_shared<ZkSession>(config_, this);
    std::lock_guard lock(mu_);
    session_ = session;
    return session;
  }

  // Creates the lock node's missing parents; ZOK once they all exist, else the first
  // error (a connection error: the caller may wait for the session and try again, since
  // each create is idempotent).
  int ensure_parents(ZkSession& session, const LockNodes& nodes) {
    std::vector<std::future<CreateResult>> pending;
    for (const auto& [path, mode] : nodes.parents())
      pending.push_back(session.create(path, "", mode));
    int rc = ZOK;
    for (auto& future : pending) {
      const CreateResult result = session.await(std::move(future));
      if (rc == ZOK && result.rc != ZOK && result.rc != ZNODEEXISTS) rc = result.rc;
    }
    return rc;
  }

  // Creates the request's node and lists the lock's children behind it in one round
  // trip (a session's requests are answered in order, so the listing sees the node).
  // A connection that breaks under it is waited out and the step made again, until the
  // request's deadline (at least an op_timeout, for a request that tries once).
  Created create(ZkSession& session, const LockNodes& nodes, const AcquireRequest& request,
                 const std::string& guid) {
    const std::string value = request_data(request.mode, client_id_, request.value);
    const std::string to_create =
        nodes.request(request.mode, guid, request.permits, request.capacity);
    const auto give_up_at = std::max(request.deadline, Clock::now() + config_.op_timeout);
    bool recreated = false;
    for (int attempt = 0; attempt == 0 || Clock::now() < give_up_at; ++attempt) {
      const auto sent = Clock::now();
      auto made = session.create(to_create, value, ZOO_EPHEMERAL_SEQUENTIAL);
      auto listed = session.children(nodes.lock);
      const CreateResult result = session.await(std::move(made));
      ChildrenResult children = session.await(std::move(listed));
      if (result.rc == ZOK) {
        Created created;
        created.path = result.path;
        created.own = *parse_request(result.path.substr(result.path.rfind('/') + 1), nodes.layout);
        created.czxid = result.czxid;
        created.children = std::move(children.children);
        created.sent = sent;
        created.recreated = recreated;
        if (children.rc != ZOK) created.children.clear();  // the wait lists again
        return created;
      }
      if (result.rc == ZNONODE) {
        const int rc = ensure_parents(session, nodes);
        // ZNONODE: the server's container check removed the group node (found empty)
        // between its create and the lock node's; they are made again.
        if (rc == ZOK || rc == ZNONODE) continue;
        // A connection lost while the parents were made (a server just back from a
        // pause): once the session is connected again, they are made again.
        if (!is_connection_error(rc) ||
            session.wait_while_suspended(config_.op_timeout) != SessionState::connected) {
          throw_zk_error(rc, "create of " + nodes.lock + "'s parents");
        }
        continue;
      }
      if (!is_connection_error(result.rc)) {
        throw_zk_error(result.rc, "create under " + nodes.lock);
      }
      // The create may have happened with only its answer lost: find it by its GUID.
      if (auto found = find_created(session, nodes, guid, give_up_at)) {
        found->recreated = recreated;
        return std::move(*found);
      }
      // Not there (yet): made again. A late first node is a stray of this GUID, deleted
      // by drop_own_strays when it is ahead and by the maintainer's search when behind.
      recreated = true;
    }
    throw Error(Errc::unavailable, "could not create a request node under " + nodes.lock);
  }

  // The request node of `guid` under `nodes.lock` after a create whose answer was lost,
  // or nullopt if the lock has none. A connection lost again while looking is waited out
  // and the look made again until `give_up_at`: a server that flaps is not a reason to
  // give up an acquire with time left. Throws unavailable if it never comes back.
  std::optional<Created> find_created(ZkSession& session, const LockNodes& nodes,
                                      const std::string& guid, Clock::time_point give_up_at) {
    int rc = ZCONNECTIONLOSS;
    for (int look = 0; look == 0 || Clock::now() < give_up_at; ++look) {
      if (session.wait_while_suspended(config_.op_timeout) != SessionState::connected) break;
      const auto found_at = Clock::now();
      ChildrenResult children = session.await(session.children(nodes.lock));
      rc = children.rc;
      if (rc == ZNONODE) return std::nullopt;
      if (is_connection_error(rc)) continue;
      if (rc != ZOK) throw_zk_error(rc, "list of " + nodes.lock);
      bool lost_again = false;
      for (const std::string& child : children.children) {
        const auto node = parse_request(child, nodes.layout);
        if (!node || node->guid != guid) continue;
        const std::string path = nodes.lock + '/' + child;
        const ExistsResult stat = session.await(session.exists(path, false));
        rc = stat.rc;
        if (rc == ZOK)
          return Created{path, *node, stat.czxid, std::move(children.children), found_at};
        if (is_connection_error(rc)) {
          lost_again = true;
          break;
        }
        // ZNONODE: deleted since the listing; another node of this GUID may follow.
      }
      if (!lost_again) return std::nullopt;
    }
    throw_zk_error(rc, "search of " + nodes.lock + " for a created request");
  }

  // Waits until nothing earlier blocks the request: the grant; or nullopt when the wait
  // timed out or was cancelled, or when the node went with its session (`session_lost`).
  std::optional<Granted> wait(const AcquireRequest& request, ZkSession& session,
                              const LockNodes& nodes, Created& created, bool& session_lost) {
    resp_client::Backoff poll(config_.retry);
    std::vector<std::string> children = std::move(created.children);
    auto listed_at = created.sent;
    bool listed = !children.empty();
    while (true) {
      if (!listed) {
        listed_at = Clock::now();
        ChildrenResult result;
        try {
          result = session.await(session.children(nodes.lock));
        } catch (const Error&) {
          result.rc = ZOPERATIONTIMEOUT;
        }
        if (is_connection_error(result.rc) || result.rc == ZSESSIONEXPIRED) {
          if (!await_reconnect(request, session, session_lost)) return std::nullopt;
          continue;
        }
        if (result.rc != ZOK && result.rc != ZNONODE) {
          throw_zk_error(result.rc, "list of " + nodes.lock);
        }
        children = std::move(result.children);
      }
      listed = false;
      if (std::find(children.begin(), children.end(), created.own.name) == children.end()) {
        session_lost = true;  // our ephemeral node is gone: so is the session it was on
        return std::nullopt;
      }
      drop_own_strays(session, nodes, created, children);
      const auto blocker = blocker_of(children, created.own, nodes);
      if (!blocker) {
        bool suspended = false;
        auto granted = grant_node(request, session, created.path, created.czxid, listed_at,
                                  session_lost, suspended);
        if (!suspended) return granted;
        // on_suspend=lose and the connection broke as the grant was made: a grant told
        // now would be lost at once. The node stays the session's; once the session is
        // connected again, a new listing proves it alive and grants.
        if (!await_reconnect(request, session, session_lost)) return std::nullopt;
        continue;
      }
      if (request.stop.stop_requested() || Clock::now() >= request.deadline) return std::nullopt;

      // Watch the one node in the way (a semaphore's request: the lock's children, since
      // any holder's going may make room), then sleep until it changes, the session
      // does, the next poll, the deadline, or a cancel.
      const bool counts = created.own.capacity > 0;
      const std::string watched = counts ? nodes.lock : nodes.lock + '/' + blocker->name;
      std::unique_lock lock(mu_);
      Watch& watch = watches_[watched];
      ++watch.waiters;
      const std::uint64_t fired = watch.fired;
      const std::uint64_t changes = state_changes_;
      lock.unlock();
      int rc = ZOK;
      bool changed = false;  // the listing that set a children watch is already news
      try {
        if (counts) {
          const auto sent = Clock::now();
          ChildrenResult now_listed = session.await(session.children(nodes.lock, true));
          rc = now_listed.rc;
          if (rc == ZOK) {
            changed = now_listed.children != children;
            children = std::move(now_listed.children);
            listed_at = sent;
            listed = true;
          }
        } else {
          rc = session.await(session.exists(watched, true)).rc;
        }
      } catch (const Error&) {
        rc = ZOPERATIONTIMEOUT;
      }
      lock.lock();
      if (rc == ZOK && !changed) {
        const auto until = std::min(request.deadline, Clock::now() + poll.next_delay());
        changed_.wait_until(lock, request.stop, until, [&] {
          return watches_[watched].fired != fired || state_changes_ != changes;
        });
        listed = false;  // woken: what the listing showed may be stale
      }
      if (--watches_[watched].waiters == 0) watches_.erase(watched);
      lock.unlock();
      if (is_connection_error(rc) || rc == ZSESSIONEXPIRED) {
        listed = false;
        if (!await_reconnect(request, session, session_lost)) return std::nullopt;
        continue;
      }
      if (rc != ZOK && rc != ZNONODE) throw_zk_error(rc, "watch of " + watched);
      if (request.stop.stop_requested()) return std::nullopt;
    }
  }

  // A node of this request's GUID that is not its own node: a create whose answer a
  // connection break lost and that the server carried out only after create() had looked
  // for it (a session's requests on its next connection can overtake those of the broken
  // one). It is this client's and ahead of the request, which would wait for it until the
  // session ends: it is deleted (now, or by the maintainer) and left out of `children`.
  // Others see it as ahead of the request until it is gone, so nobody is let in beside it.
  void drop_own_strays(ZkSession& session, const LockNodes& nodes, const Created& created,
                       std::vector<std::string>& children) {
    std::erase_if(children, [&](const std::string& child) {
      if (child == created.own.name) return false;
      const auto node = parse_request(child, nodes.layout);
      if (!node || node->guid != created.own.guid) return false;
      withdraw(session, nodes.lock, created.own.guid, nodes.lock + '/' + child, created.path);
      return true;
    });
  }

  // After a connection error in a wait: sleeps until the session is connected again
  // (true), expired (false, session_lost), or the wait is over (false).
  bool await_reconnect(const AcquireRequest& request, ZkSession& session, bool& session_lost) {
    while (true) {
      if (request.stop.stop_requested() || Clock::now() >= request.deadline) return false;
      const auto left = std::chrono::duration_cast<milliseconds>(request.deadline - Clock::now());
      const SessionState state =
          session.wait_while_suspended(std::clamp(left, milliseconds(1), milliseconds(100)));
      if (state == SessionState::expired) {
        session_lost = true;
        return false;
      }
      if (state == SessionState::connected) return true;
    }
  }

  // nullopt with `session_lost` when the session expired; with `suspended` when it is
  // suspended and on_suspend=lose (the caller waits for it to connect again).
  std::optional<Granted> grant_node(const AcquireRequest& request, ZkSession& session,
                                    const std::string& path, std::int64_t czxid,
                                    Clock::time_point listed_at, bool& session_lost,
                                    bool& suspended) {
    // The lease is the session: a grant lasts min(ttl, session timeout) past the last
    // answer, so the core must renew it at a third of that, not of the ttl asked for.
    GrantRef ref{request.key,
                 request.mode,
                 static_cast<std::uint64_t>(czxid),
                 std::min(request.options.ttl, session.timeout()),
                 owner_of(session.id(), path),
                 request.permits};
    // The listing proved the session alive when it was sent: the server cannot expire it
    // (and free the node) earlier than a session timeout after that.
    const auto expires = listed_at + std::min(request.options.ttl, session.timeout());
    std::lock_guard lock(mu_);
    if (session.state() == SessionState::expired) {
      session_lost = true;
      return std::nullopt;
    }
    if (session.state() == SessionState::suspended && config_.lose_on_suspend) {
      suspended = true;
      return std::nullopt;
    }
    held_[path] = Held{ref, session.id()};
    // The core declares a grant lost when this expiry passes unrenewed (renewals failed,
    // or the watchdog is off) and never releases it then, yet the session would keep its
    // node: the maintainer deletes the node once the expiry has passed.
    expiring_[path] = expires;
    return Granted{std::move(ref), expires};
  }

  // Deletes a request node now; if ZooKeeper cannot be reached, the maintainer retries.
  // `keep`: as in Withdrawal.
  void withdraw(ZkSession& session, const std::string& lock, const std::string& guid,
                const std::string& path, const std::string& keep = "") {
    int rc = ZCONNECTIONLOSS;
    try {
      rc = session.await(session.remove(path));
    } catch (const Error&) {
    }
    if (rc == ZOK || rc == ZNONODE || rc == ZSESSIONEXPIRED) return;
    withdraw_later(session.id(), lock, guid, path, keep);
  }

  void withdraw_later(std::int64_t session, const std::string& lock, const std::string& guid,
                      const std::string& path, const std::string& keep) {
    {
      std::lock_guard guard(mu_);
      withdrawals_.push_back(
          Withdrawal{session, lock, guid, path, Clock::now() + config_.session_timeout, keep});
    }
    changed_.notify_all();
  }

  // Stops tracking a grant (released). Requires mu_.
  void forget(const std::string& path) {
    held_.erase(path);
    expiring_.erase(path);
  }

  // The maintainer thread: reports lost grants (never from the C client's thread, so a
  // user's on_lost callback cannot stall ZooKeeper's completions), deletes the nodes of
  // grants whose local expiry passed unrenewed (the core declared them lost), and
  // retries withdrawals.
  void maintain(std::stop_token stop) {
    std::unique_lock lock(mu_);
    while (!stop.stop_requested()) {
      std::vector<GrantRef> lost = std::move(to_report_);
      to_report_.clear();
      if (!lost.empty()) {
        lock.unlock();
        for (const GrantRef& grant : lost) report_lost(grant);
        lock.lock();
        continue;
      }
      const auto now = Clock::now();
      for (auto it = expiring_.begin(); it != expiring_.end();) {
        if (it->second <= now) {
          const auto held = held_.find(it->first);
          if (held != held_.end()) {
            withdrawals_.push_back(Withdrawal{held->second.session, "", "", it->first});
            held_.erase(held);
          }
          it = expiring_.erase(it);
        } else {
          ++it;
        }
      }
      if (!withdrawals_.empty()) {
        std::vector<Withdrawal> pending = std::move(withdrawals_);
        withdrawals_.clear();
        lock.unlock();
        std::vector<Withdrawal> failed = retry(pending);
        lock.lock();
        for (Withdrawal& withdrawal : failed) withdrawals_.push_back(std::move(withdrawal));
      }
      auto next = Clock::now() + (withdrawals_.empty() ? milliseconds(1000) : milliseconds(200));
      for (const auto& [path, when] : expiring_) next = std::min(next, when);
      const std::uint64_t changes = state_changes_;
      const std::size_t reports = to_report_.size();
      const std::size_t queued = withdrawals_.size();
      changed_.wait_until(lock, stop, next, [&] {
        return state_changes_ != changes || to_report_.size() != reports ||
               withdrawals_.size() != queued;
      });
    }
  }

  // One search of `withdrawal.lock` for nodes of its GUID other than the one to keep,
  // deleting each; true while it is to be made again (a delete failed, or a late create
  // is not yet out of the question).
  bool withdraw_guid(ZkSession& session, const Withdrawal& withdrawal) {
    const ChildrenResult children = session.await(session.children(withdrawal.lock));
    if (children.rc == ZNONODE) return false;  // no parent: no create can land there
    if (children.rc != ZOK) return true;
    bool again = Clock::now() < withdrawal.look_until;
    for (const std::string& child : children.children) {
      const auto node = parse_request(child, config_.layout);
      const std::string path = withdrawal.lock + '/' + child;
      if (!node || node->guid != withdrawal.guid || path == withdrawal.keep) continue;
      const int rc = session.await(session.remove(path));
      if (rc != ZOK && rc != ZNONODE) again = true;
    }
    return again;
  }

  // One attempt at each withdrawal; returns those still to do.
  std::vector<Withdrawal> retry(std::vector<Withdrawal>& pending) {
    std::vector<Withdrawal> failed;
    const std::shared_ptr<ZkSession> session = live_session();
    for (Withdrawal& withdrawal : pending) {
      // A node of a session that is gone went with it.
      if (!session || session->id() != withdrawal.session) continue;
      if (session->state() != SessionState::connected) {
        failed.push_back(std::move(withdrawal));
        continue;
      }
      try {
        if (!withdrawal.path.empty()) {
          const int rc = session->await(session->remove(withdrawal.path));
          if (rc != ZOK && rc != ZNONODE) {
            failed.push_back(std::move(withdrawal));
            continue;
          }
          withdrawal.path.clear();
        }
        if (withdrawal.guid.empty() || !withdraw_guid(*session, withdrawal)) continue;
        failed.push_back(std::move(withdrawal));
      } catch (const Error&) {
        failed.push_back(std::move(withdrawal));
      }
    }
    return failed;
  }

  const ZkConfig config_;
  const std::string client_id_;
  std::atomic<std::uint64_t> counter_{0};
  // Started before the session, whose state changes it hears of; stopped first.
  const std::shared_ptr<AsyncWaits> waits_;
  std::mutex open_mu_;       // one session opened at a time
  std::mutex opener_mu_;     // for the waits (open_session)
  bool opening_ = false;     // guarded by opener_mu_
  std::thread opener_;       // guarded by opener_mu_
  core::InFlight releases_;  // deletes sent by release_async, not yet answered

  std::mutex mu_;
  std::condition_variable_any changed_;
  std::shared_ptr<ZkSession> session_;                 // guarded by mu_
  std::map<std::string, Held> held_;                   // by node path; guarded by mu_
  std::map<std::string, Clock::time_point> expiring_;  // local expiries; guarded by mu_
  std::map<std::string, Watch> watches_;               // by watched path; guarded by mu_
  std::vector<GrantRef> to_report_;                    // lost, to report; guarded by mu_
  std::vector<Withdrawal> withdrawals_;                // guarded by mu_
  std::uint64_t state_changes_ = 0;                    // guarded by mu_
  std::jthread maintainer_;                            // last: starts after the rest exists
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  return std::make_unique<ZkEngine>(parse_config(uri, options));
}

}  // namespace warden::engines::zookeeper
