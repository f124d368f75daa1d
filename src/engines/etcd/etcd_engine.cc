#include "engines/etcd/etcd_engine.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "core/background_releases.h"
#include "core/client_id.h"
#include "core/stoppable_sleep.h"
#include "engines/etcd/async_waits.h"
#include "engines/etcd/etcd_config.h"
#include "engines/etcd/etcd_rpc.h"
#include "engines/etcd/key_watch.h"
#include "engines/etcd/lock_keys.h"
#include "engines/etcd/permit_queue.h"
#include "engines/etcd/request_slots.h"
#include "engines/etcd/request_txns.h"
#include "engines/etcd/request_value.h"
#include "engines/etcd/sessions.h"
#include "engines/resp_client/backoff.h"
#include "warden/error.h"

namespace warden::engines::etcd {
namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;
using etcdserverpb::RangeRequest;
using etcdserverpb::TxnRequest;
using etcdserverpb::TxnResponse;

// etcd's default --max-txn-ops: a renewal round of more grants takes several Txns.
constexpr std::size_t kMaxTxnOps = 128;

// GrantRef::owner of an etcd grant: "LEASE KEY".
std::string owner_of(std::int64_t lease, const std::string& key) {
  return std::to_string(lease) + ' ' + key;
}

struct Owner {
  std::int64_t lease = 0;
  std::string key;         // LockKeys::request(mode, "CLIENT-SLOT"), or lease_request(lease)
  std::string lock;        // LockKeys::lock of the key
  std::uint32_t slot = 0;  // layout=warden only
};

Owner parse_owner(const std::string& owner, Layout layout) {
  const auto space = owner.find(' ');
  Owner out;
  if (space == std::string::npos ||
      std::from_chars(owner.data(), owner.data() + space, out.lease).ec != std::errc()) {
    throw Error(Errc::not_owner, "not a grant of an etcd:// client: '" + owner + "'");
  }
  out.key = owner.substr(space + 1);
  if (layout == Layout::concurrency) {
    // "…/NAME/" + hex(lease): the key must be the one named after the lease.
    const auto id = out.key.rfind('/');
    if (id == std::string::npos || out.key.substr(id + 1) != lease_hex(out.lease)) {
      throw Error(Errc::not_owner, "not a grant of an etcd:// client: '" + owner + "'");
    }
    out.lock = out.key.substr(0, id + 1);
    return out;
  }
  const auto id = out.key.rfind('/');
  const auto dash = out.key.rfind('-');
  if (id == std::string::npos || id < 2 || dash == std::string::npos || dash < id ||
      std::from_chars(out.key.data() + dash + 1, out.key.data() + out.key.size(), out.slot).ec !=
          std::errc()) {
    throw Error(Errc::not_owner, "not a grant of an etcd:// client: '" + owner + "'");
  }
  out.lock = out.key.substr(0, id - 1);
  return out;
}

class EtcdEngine final : public core::Engine, public AsyncWaits::Host {
 public:
  explicit EtcdEngine(EtcdConfig config)
      : config_(std::move(config)),
        rpc_(std::make_shared<EtcdRpc>(config_)),
        sessions_(rpc_, config_, [this](const GrantRef& grant) { report_lost(grant); }),
        client_id_(core::random_client_id()) {
    // The waits share the Client's session; layout=concurrency names each request's key
    // after its lease, and the watchdog off gives each request a lease of its own: those
    // wait on a thread each (the seam's default).
    if (config_.layout == Layout::warden && config_.watchdog) {
      waits_ = AsyncWaits::start(*this, *rpc_, config_, client_id_);
      opener_ = std::jthread([this](std::stop_token stop) { open_sessions(std::move(stop)); });
    }
  }

  ~EtcdEngine() override {
    if (waits_) waits_->stop();  // it uses this engine until then
    if (opener_.joinable()) {
      opener_.request_stop();
      opener_.join();  // a lease grant: op_timeout at most
    }
  }

  void ping() { rpc_->ping(); }

  Capabilities capabilities() const override {
    // layout=concurrency is etcd's Mutex: exclusive locks only (see lock_keys.h).
    const bool warden_layout = config_.layout == Layout::warden;
    Capabilities caps;
    caps.shared = warden_layout;
    caps.fair = true;
    caps.non_fair = false;    // the revision queue has no place for barging
    caps.lock_delay = false;  // see docs/engines/etcd.md
    caps.fencing = true;
    caps.durable_tokens = true;  // revisions survive restarts and leader changes
    caps.check = true;
    caps.semaphore = warden_layout;  // a queue of permits requests (permit_queue.h)
    caps.election = warden_layout;   // a candidate's value rides in its key's value
    caps.watch = true;               // an etcd watch over the lock's keys (key_watch.h)
    caps.cache = true;               // revokes by that watch (core/watch_revokes.h)
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    const LockKeys keys = lock_keys(request.key.group, request.key.name);
    const bool concurrency = config_.layout == Layout::concurrency;
    if (concurrency && (request.mode != Mode::exclusive || request.capacity > 0)) {
      // The core refuses these by the capabilities already; this is for any other caller.
      throw Error(Errc::unsupported,
                  "etcd:// layout=concurrency holds exclusive locks only (etcd's "
                  "concurrency.Mutex has no shared mode, semaphores or elections); use "
                  "layout=warden");
    }
    // Fixed here: recomputed after the deadline, "op_timeout from now" would give a
    // withdrawal that follows a call which ran to the bound another whole op_timeout.
    const Clock::time_point bound = bound_of(request);
    // A request whose session turns out to be gone queues again on a new one; a few
    // times in a row means something else is wrong.
    for (int attempt = 0;; ++attempt) {
      // layout=concurrency names the key after the lease: the Client's session, unless
      // another request of this Client on this lock has that key already (then a lease
      // of its own, or the two requests would be one key).
      const auto session =
          sessions_.begin(request.options.ttl, concurrency ? keys.lock : std::string());
      const std::uint32_t slot = concurrency ? 0 : slots_.take(keys.lock);
      const std::string id = client_id_ + '-' + std::to_string(slot);
      const std::string key = concurrency            ? keys.lease_request(session->lease)
                              : request.capacity > 0 ? keys.permits_request(id)
                                                     : keys.request(request.mode, id);
      // Ends the request without a grant; the slot is reused once the key is gone. Past
      // the acquire's own bound (a frozen or cut-off cluster), the keeper deletes the key
      // without the caller waiting for it.
      const auto withdraw = [&](const std::string& what) {
        const auto until = request.stop.stop_requested()
                               ? std::min(bound, Clock::now() + config_.op_timeout)
                               : bound;
        if (sessions_.withdrawn(session, what, until) && !concurrency) {
          slots_.give_back(keys.lock, slot);
        }
      };
      Created created;
      try {
        created = created_from(rpc_->txn(create_txn(request, keys, key, client_id_, session->lease)),
                               request, keys, key);
      } catch (const Error& e) {
        withdraw(key);  // the create may have happened
        // "requested lease not found": the session expired before the keeper noticed.
        if (e.code() != Errc::lost || attempt >= kSessionRetries) throw;
        sessions_.lose(session->lease);
        continue;
      }
      if (!created.free && Clock::now() >= request.deadline) {  // a try on a busy lock
        withdraw(key);
        return std::nullopt;
      }
      std::optional<Granted> granted;
      bool session_lost = false;
      try {
        granted = created.free
                      ? grant(request, key, created.revision, *session, session_lost)
                      : wait(request, keys, key, created.revision, *session, session_lost);
      } catch (const Error&) {
        withdraw(key);
        throw;
      }
      if (granted) {
        if (sessions_.granted(*session, key, granted->grant, granted->expires)) return granted;
        session_lost = true;  // lost between the last read and now
      }
      if (!session_lost) {
        withdraw(key);
        return std::nullopt;
      }
      // The key went with its lease (or may have): queue again on a new session, if
      // time is left.
      sessions_.lose(session->lease);
      withdraw(key);
      if (request.stop.stop_requested() || Clock::now() >= request.deadline) return std::nullopt;
      if (attempt >= kSessionRetries) {
        throw Error(Errc::unavailable,
                    "etcd: every session of this client was lost while "
                    "acquiring " +
                        request.key.joined());
      }
    }
  }

  // Waits on the engine's one waits thread (async_waits.h), without a thread each.
  void acquire_async(AcquireRequest request, AcquireDone done) override {
    if (!waits_) {
      core::Engine::acquire_async(std::move(request), std::move(done));
      return;
    }
    LockKeys keys;
    try {
      keys = lock_keys(request.key.group, request.key.name);
    } catch (...) {
      done(std::nullopt, std::current_exception());
      return;
    }
    waits_->acquire(std::move(request), std::move(keys), std::move(done));
  }
  bool waits_without_threads() const override { return waits_ != nullptr; }

  // AsyncWaits::Host.
  std::shared_ptr<const Session> join_session(std::chrono::milliseconds ttl) override {
    return sessions_.join(ttl);
  }
  void open_session(std::chrono::milliseconds ttl) override {
    {
      std::lock_guard lock(opener_mu_);
      if (!opening_.insert(ttl).second) return;  // asked for already
    }
    opener_wake_.notify_all();
  }
  std::string take_key(const AcquireRequest& request, const LockKeys& keys,
                       std::uint32_t& slot) override {
    slot = slots_.take(keys.lock);
    const std::string id = client_id_ + '-' + std::to_string(slot);
    return request.capacity > 0 ? keys.permits_request(id) : keys.request(request.mode, id);
  }
  std::optional<Granted> grant_key(const AcquireRequest& request, const std::string& key,
                                   std::int64_t revision, const Session& session,
                                   bool& session_lost) override {
    auto granted = grant(request, key, revision, session, session_lost);
    if (granted && !sessions_.granted(session, key, granted->grant, granted->expires)) {
      session_lost = true;  // lost between the last read and now
      return std::nullopt;
    }
    return granted;
  }
  void lose(std::int64_t lease) override { sessions_.lose(lease); }
  void withdrawn(const std::shared_ptr<const Session>& session, const LockKeys& keys,
                 const std::string& key, std::uint32_t slot, bool deleted) override {
    if (!deleted) {
      (void)sessions_.withdrawn(session, key, Clock::time_point::min());  // the keeper's now
      return;
    }
    (void)sessions_.withdrawn(session, {});
    slots_.give_back(keys.lock, slot);
  }

  std::vector<Renewed> renew(std::span<const GrantRef> grants) override {
    std::vector<Renewed> out;
    out.reserve(grants.size());
    for (std::size_t first = 0; first < grants.size(); first += kMaxTxnOps) {
      const std::size_t last = std::min(grants.size(), first + kMaxTxnOps);
      TxnRequest request;
      std::vector<Owner> owners;
      for (std::size_t i = first; i < last; ++i) {
        owners.push_back(parse_owner(grants[i].owner, config_.layout));
        add_key_read(request, owners.back().key, true);
      }
      // Short enough to fail over from a frozen member before the leases could lapse.
      std::chrono::milliseconds shortest = config_.op_timeout;
      for (std::size_t i = first; i < last; ++i) shortest = std::min(shortest, grants[i].ttl);
      const auto timeout =
          std::clamp(shortest / 3, std::chrono::milliseconds(50), config_.op_timeout);
      const TxnResponse response = rpc_->txn(request, nullptr, timeout);
      for (std::size_t i = first; i < last; ++i) {
        const Owner& owner = owners[i - first];
        const auto& range = range_at(response, static_cast<int>(i - first), "renew");
        const bool held = range.kvs_size() == 1 && range.kvs(0).create_revision() ==
                                                       static_cast<std::int64_t>(grants[i].token);
        // The session's keep-alives extend every key on it; the renewal confirms that
        // this key is still one of them.
        const auto expires = held ? sessions_.expires(owner.lease) : std::nullopt;
        if (!expires) {
          out.push_back(Renewed::lost());
          continue;
        }
        switch (sessions_.renewed(owner.lease, owner.key, *expires)) {
          case Sessions::Renewal::advanced:
            out.push_back(Renewed::until(*expires));
            break;
          case Sessions::Renewal::stale:
            out.push_back(Renewed::unknown());
            break;
          case Sessions::Renewal::gone:
            out.push_back(Renewed::lost());
            break;
        }
      }
    }
    return out;
  }

  void release(const GrantRef& grant) override {
    const Owner owner = parse_owner(grant.owner, config_.layout);
    // However this ends, the key is no longer being released (see release_async).
    const Settled settled{sessions_, owner};
    // Only a grant this client made, on one of its own sessions, is released: the key,
    // the token and the lease id are all readable by anyone who can range the prefix, so
    // another client that builds our GrantRef must not delete our key. (layout=concurrency
    // keys carry no client id: it must be a grant this Client holds on one of its leases.)
    if (!own_key(owner)) return;
    // A session this client no longer has ended with its lease, and the key with it:
    // nothing to delete.
    if (!sessions_.expires(owner.lease)) {
      sessions_.released(owner.lease, owner.key);
      give_back(owner);
      return;
    }
    // Guarded by our create_revision and our lease: a key of the same name created since
    // (it cannot be, names are unique per request, but the guard costs nothing) is left
    // alone.
    TxnRequest request;
    add_owner_guard(request, owner, grant.token);
    request.add_success()->mutable_request_delete_range()->set_key(owner.key);
    sessions_.releasing(owner.lease, owner.key);
    rpc_->txn(request);
    // An own lease is revoked too; the session lease (layout=concurrency too) lives on.
    sessions_.released(owner.lease, owner.key);
    give_back(owner);
  }

  // One Txn guarded like release's delete: the key must still be the grant's (its
  // create_revision) on the grant's lease. The put names that lease again, since a put
  // without one would detach the key from its session and it would outlive the Client.
  bool proclaim(const GrantRef& grant, std::string_view value) override {
    if (config_.layout == Layout::concurrency) {
      throw Error(Errc::unsupported, "etcd:// layout=concurrency has no elections");
    }
    const Owner owner = parse_owner(grant.owner, config_.layout);
    // Only a grant this client made, on a session it still has (see release).
    if (!own_key(owner)) return false;
    if (!sessions_.expires(owner.lease)) return false;
    TxnRequest request;
    add_owner_guard(request, owner, grant.token);
    auto* put = request.add_success()->mutable_request_put();
    put->set_key(owner.key);
    put->set_value(request_value(grant.mode, client_id_, value));
    put->set_lease(owner.lease);
    return rpc_->txn(request).succeeded();
  }

  // Sent by a thread of the engine's own: the call waits for its answer.
  // layout=concurrency marks the key as being released at once: the Client's next
  // request on this lock (unlock() then lock() again) waits for this delete on the
  // session lease, instead of taking a lease of its own because the key's name is still
  // in use.
  void release_async(const GrantRef& grant, ReleaseDone done) override {
    if (config_.layout == Layout::concurrency) {
      try {
        const Owner owner = parse_owner(grant.owner, config_.layout);
        sessions_.releasing(owner.lease, owner.key);
      } catch (const Error&) {
        // Not a grant of ours: release() refuses it on the releases' thread.
      }
    }
    background_.post(grant, std::move(done));
  }
  void settle_releases() override { background_.settle(); }

  bool check(const Sequencer& sequencer) override {
    const LockKeys keys = lock_keys(sequencer.group, sequencer.name);
    RangeRequest request;
    request.set_key(keys.lock);
    request.set_range_end(prefix_end(keys.lock));
    const auto token = static_cast<std::int64_t>(sequencer.token);
    request.set_min_create_revision(token);
    request.set_max_create_revision(token);
    request.set_keys_only(true);
    request.set_limit(1);
    const auto response = rpc_->range(request);
    if (response.kvs_size() != 1) return false;
    // Every request of layout=concurrency is exclusive.
    if (keys.layout == Layout::concurrency) return sequencer.mode == Mode::exclusive;
    // An exclusive grant is a w/ key; a shared one an s/ key, or a semaphore's p/ key.
    const std::string_view kind =
        std::string_view(response.kvs(0).key()).substr(keys.lock.size(), 2);
    return sequencer.mode == Mode::exclusive ? kind == "w/" : kind == "s/" || kind == "p/";
  }

  std::unique_ptr<core::KeyWatch> watch(const core::LockKey& key) override {
    return open_key_watch(rpc_, lock_keys(key.group, key.name));
  }

  LockStatus inspect(const core::LockKey& key) override {
    return inspect_on(*rpc_, lock_keys(key.group, key.name), key);
  }

  std::vector<LockSummary> list(std::string_view group) override {
    return list_on(*rpc_, config_.prefix, config_.layout, group);
  }

 private:
  LockKeys lock_keys(const std::string& group, const std::string& name) const {
    return LockKeys::of(config_.prefix, group, name, config_.layout);
  }

  // Whether `owner` names a key this Client could have made: its client id and slot
  // (layout=warden), or a grant it holds on one of its live leases (layout=concurrency:
  // another client's lease is not among them, and parse_owner has checked the key's
  // name; a lease this Client lost took the key with it; a waiting request's key on the
  // shared session is not a grant, and deleting it would cost the whole session).
  bool own_key(const Owner& owner) const {
    if (config_.layout == Layout::concurrency) return sessions_.holds(owner.lease, owner.key);
    return owner.key.ends_with(client_id_ + '-' + std::to_string(owner.slot));
  }

  // Ends a release's "releasing" mark (Sessions::releasing) on every way out of
  // release(): after released() it is gone already; otherwise the grant is still held.
  struct Settled {
    Sessions& sessions;
    const Owner& owner;
    ~Settled() { sessions.release_failed(owner.lease, owner.key); }
  };

  void give_back(const Owner& owner) {
    if (config_.layout == Layout::warden) slots_.give_back(owner.lock, owner.slot);
  }

  // The latest an acquire's calls may end: op_timeout past its deadline (a try: past now,
  // so take it once, when the acquire begins).
  Clock::time_point bound_of(const AcquireRequest& request) const {
    const auto from = std::max(request.deadline, Clock::now());
    return from > Clock::time_point::max() - config_.op_timeout ? Clock::time_point::max()
                                                                : from + config_.op_timeout;
  }

  // The Txn's condition "the grant's key is still the one created at `token`, on the
  // owner's lease": release and proclaim touch nothing else.
  static void add_owner_guard(TxnRequest& txn, const Owner& owner, std::uint64_t token) {
    auto* compare = txn.add_compare();
    compare->set_key(owner.key);
    compare->set_target(etcdserverpb::Compare::CREATE);
    compare->set_result(etcdserverpb::Compare::EQUAL);
    compare->set_create_revision(static_cast<std::int64_t>(token));
    auto* lease = txn.add_compare();
    lease->set_key(owner.key);
    lease->set_target(etcdserverpb::Compare::LEASE);
    lease->set_result(etcdserverpb::Compare::EQUAL);
    lease->set_lease(owner.lease);
  }

  std::optional<Granted> grant(const AcquireRequest& request, const std::string& key,
                               std::int64_t revision, const Session& session, bool& session_lost) {
    const auto expires = sessions_.expires(session.lease);
    // Gone, or its keep-alives failed past its expiry: the key may be gone too.
    if (!expires || *expires <= Clock::now()) {
      session_lost = true;
      return std::nullopt;
    }
    return Granted{GrantRef{request.key, request.mode, static_cast<std::uint64_t>(revision),
                            request.options.ttl, owner_of(session.lease, key), request.permits},
                   *expires};
  }

  // Waits until no earlier request blocks `key` (a semaphore's: until its permits fit),
  // watching the deletion the look names (request_txns.h): the grant, or nullopt for a
  // timed-out or cancelled wait, or when the key vanished with its session
  // (`session_lost`). A watch that ends without that deletion (its poll) is followed by a
  // poll of the one key it watched, not a look at the whole queue, as the asynchronous
  // waits do.
  std::optional<Granted> wait(const AcquireRequest& request, const LockKeys& keys,
                              const std::string& key, std::int64_t revision, const Session& session,
                              bool& session_lost) {
    resp_client::Backoff poll(config_.retry);
    std::string watched;     // the one key the last look named (empty: a semaphore's range)
    bool polling = false;    // the last watch ended without its deletion
    while (true) {
      TxnResponse response;
      try {
        response = rpc_->txn(polling ? recheck_txn(key, watched)
                                     : look_txn(request, keys, key, revision),
                             nullptr, {}, EtcdRpc::Bound{bound_of(request), request.stop});
      } catch (const Error& e) {
        // Cancelled, or no answer by the deadline (plus op_timeout): the wait ends as
        // what it is; the caller withdraws the key.
        if (request.stop.stop_requested() || Clock::now() >= request.deadline) return std::nullopt;
        // No answer within op_timeout (a frozen or cut-off member, a machine starved of
        // CPU) while the wait has time left: its place in the queue is its key, which
        // lives as long as its lease, so it looks again after a pause, as a zk:// waiter
        // waits for its session to come back. The next answer says whether the key
        // outlived the gap (if not, session_lost: it queues again).
        if (!worth_looking_again(e.code())) throw;
        const auto until = std::min(request.deadline, Clock::now() + poll.next_delay());
        if (!core::sleep_until(until, request.stop)) return std::nullopt;
        continue;
      }
      std::string range_end;
      std::int64_t seen_at = 0;
      if (polling) {
        const Recheck seen = rechecked(response, revision);
        if (seen.gone) {
          session_lost = true;
          return std::nullopt;
        }
        if (!seen.blocked) {  // gone from the way: look at the queue
          polling = false;
          continue;
        }
        seen_at = seen.revision;
      } else {
        const Look look = looked(response, request, keys, revision);
        if (look.gone) {
          session_lost = true;
          return std::nullopt;
        }
        if (look.holds) return grant(request, key, revision, session, session_lost);
        watched = look.watch;
        range_end = look.range_end;
        seen_at = look.revision;
      }
      if (request.stop.stop_requested() || Clock::now() >= request.deadline) return std::nullopt;
      const auto until = std::min(request.deadline, Clock::now() + poll.next_delay());
      const auto end =
          rpc_->wait_for_delete(watched, seen_at + 1, until, request.stop, range_end);
      if (request.stop.stop_requested()) return std::nullopt;
      polling = end != EtcdRpc::WatchEnd::deleted && range_end.empty();
    }
  }

  // The waits' sessions, granted one TTL at a time on opener_ (a lease grant blocks).
  void open_sessions(std::stop_token stop) {
    std::unique_lock lock(opener_mu_);
    while (!stop.stop_requested()) {
      if (opening_.empty()) {
        opener_wake_.wait(lock, stop, [&] { return !opening_.empty(); });
        continue;
      }
      const auto ttl = *opening_.begin();
      lock.unlock();
      std::exception_ptr error;
      try {
        // Counted as waiting by begin(): not so, once the waits have joined it.
        (void)sessions_.withdrawn(sessions_.begin(ttl), {});
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      // Before the waits hear: one that asks after this asks anew.
      opening_.erase(ttl);
      lock.unlock();
      waits_->session_opened(ttl, error);
      lock.lock();
    }
  }

  const EtcdConfig config_;
  const std::shared_ptr<EtcdRpc> rpc_;
  Sessions sessions_;
  const std::string client_id_;
  RequestSlots slots_;
  core::BackgroundReleases background_{[this](const GrantRef& grant) { release(grant); }};
  std::mutex opener_mu_;
  std::condition_variable_any opener_wake_;
  std::set<std::chrono::milliseconds> opening_;  // TTLs asked for; guarded by opener_mu_
  std::shared_ptr<AsyncWaits> waits_;            // null: the seam's default (see above)
  std::jthread opener_;                          // last: started after the rest exists
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  auto engine = std::make_unique<EtcdEngine>(parse_config(uri, options));
  engine->ping();
  return engine;
}

}  // namespace warden::engines::etcd
