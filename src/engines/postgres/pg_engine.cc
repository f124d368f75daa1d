#include "engines/postgres/pg_engine.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "core/client_id.h"
#include "core/recent_map.h"
#include "engines/postgres/pg_config.h"
#include "engines/postgres/pg_connection.h"
#include "engines/postgres/pg_schema.h"
#include "warden/error.h"

namespace warden::engines::postgres {
namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;
using std::chrono::milliseconds;

constexpr const char* kLockTimeout = "55P03";    // lock_not_available: lock_timeout fired
constexpr const char* kQueryCanceled = "57014";  // our PQcancel
// A cancelled timed wait: PostgreSQL's lock_timeout should end it first; this is later.
constexpr milliseconds kCancelGrace{200};

// Does this grant's session hold its marker lock (key -token)? 1 or 0 rows.
constexpr const char* kHeldSql =
    "SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' "
    "AND objsubid = 1 AND granted AND classid = $1::oid AND objid = $2::oid";
// Frees everything the session holds and ends its lease clock: it is pooled again.
constexpr const char* kResetSql =
    "SELECT pg_advisory_unlock_all(), set_config('idle_session_timeout', '0', false)";
// A release: frees the grant's lock and marker. The session keeps its idle timeout (the
// next grant with that TTL need not set it again) and is pooled within it.
constexpr const char* kReleaseName = "warden_release";
constexpr const char* kReleaseSql = "SELECT pg_advisory_unlock_all()";

std::string check_sql(const std::string& schema) {
  return "SELECT EXISTS (SELECT 1 FROM " + quoted(schema) +
         ".locks k "
         "JOIN pg_locks l ON l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted "
         "  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
         "  AND l.classid = ((k.id >> 32) & 4294967295)::oid "
         "  AND l.objid = (k.id & 4294967295)::oid AND l.mode = $3 "
         "JOIN pg_locks m ON m.pid = l.pid AND m.locktype = 'advisory' AND m.objsubid = 1 "
         "  AND m.granted AND m.mode = 'ExclusiveLock' AND m.database = l.database "
         "  AND m.classid = $4::oid "
         "  AND m.objid = $5::oid "
         "WHERE k.grp = $1 AND k.name = $2::bytea)";
}

constexpr const char* kPermitsName = "warden_permits";
constexpr const char* kCheckedName = "warden_lock_checked";
constexpr const char* kProclaimName = "warden_proclaim";

// Sets the value of the election's grant (lock id $1, term $2) to $3, only while this
// session holds the grant's marker ($4, $5): one row when it did. An upsert, since a
// campaign with an empty value writes no row; never over a later term's row.
std::string proclaim_sql(const std::string& schema) {
  return "INSERT INTO " + quoted(schema) +
         ".leaders AS v (lock_id, token, value) SELECT $1::bigint, $2::bigint, $3::bytea "
         "WHERE EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() "
         "AND locktype = 'advisory' AND objsubid = 1 AND granted AND classid = $4::oid "
         "AND objid = $5::oid) ON CONFLICT (lock_id) DO UPDATE SET token = excluded.token, "
         "value = excluded.value WHERE v.token <= excluded.token RETURNING 1";
}

const char* pg_mode(Mode mode) { return mode == Mode::shared ? "ShareLock" : "ExclusiveLock"; }

// One grant: the session (connection) that holds it.
struct Held {
  std::mutex mu;
  std::unique_ptr<PgConnection> conn;  // guarded by mu; null once the session ended
  Clock::time_point expires;           // guarded by mu
};

class PgEngine final : public core::Engine {
 public:
  explicit PgEngine(PgConfig config)
      : config_(std::move(config)),
        grants_sql_(all_grants(config_.schema)),
        check_sql_(check_sql(config_.schema)),
        permits_sql_("SELECT " + quoted(config_.schema) +
                     ".acquire_permits($1::bigint, $2::integer, $3::integer, $4::boolean, "
                     "$5::integer, $6::integer)"),
        checked_sql_("SELECT " + quoted(config_.schema) +
                     ".lock_checked($1::bigint, $2::boolean, $3::boolean, $4::integer, "
                     "$5::integer, $6::boolean, $7::bytea)"),
        proclaim_sql_(proclaim_sql(config_.schema)),
        instance_(core::random_client_id()) {}

  // Logs in and makes sure the registry exists: bad credentials fail at open.
  void setup() {
    auto conn = PgConnection::open(config_);
    install(*conn, config_.schema, op_limits());
    give_back(std::move(conn));
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.shared = true;
    caps.fair = true;         // PostgreSQL's lock queue (docs/engines/postgres.md)
    caps.non_fair = false;    // no request can jump that queue
    caps.lock_delay = false;  // a session that ends frees its locks at once
    caps.fencing = true;
    caps.durable_tokens = true;  // a sequence: WAL-logged ahead of use, never goes back
    caps.check = true;
    caps.semaphore = true;  // SCHEMA.acquire_permits: a turnstile and counted permits
    caps.election = true;   // SCHEMA.leaders, written by the campaign's grant statement
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    if (request.stop.stop_requested()) return std::nullopt;
    const std::int64_t id = id_of(request.key);
    auto conn = take();
    const auto now = Clock::now();
    const bool wait = request.deadline > now;
    int wait_ms = 0;  // 0: forever
    QueryLimits limits;
    limits.stop = request.stop;
    // A cancel (a stop, or the deadline's backstop) the server does not answer within
    // op_timeout ends the wait: a frozen server holds no call past it.
    limits.after_cancel = config_.op_timeout;
    if (!wait) {
      limits.give_up_at = now + config_.op_timeout;
    } else if (request.deadline != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<milliseconds>(request.deadline - now).count();
      wait_ms = static_cast<int>(std::clamp<std::int64_t>(left, 1, INT_MAX));
      limits.cancel_at = request.deadline + kCancelGrace;
    }
    const milliseconds ttl = request.options.ttl;
    const int ttl_ms = static_cast<int>(std::clamp<std::int64_t>(ttl.count(), 1, INT_MAX));
    const bool elect =
        request.capacity == 0 && request.mode == Mode::exclusive && !request.value.empty();
    const auto sent = Clock::now();
    // Throws with the connection closed: the session, and whatever it took, is gone.
    std::optional<Reply> answered;
    try {
      answered.emplace(request.capacity > 0
                           ? acquire_permits(*conn, request, id, wait, wait_ms, ttl_ms, limits)
                           : grant(*conn, request, id, wait, wait_ms, ttl_ms, elect, limits));
    } catch (const Error& e) {
      // The server answered neither the wait nor its cancel (frozen, or cut off): the
      // wait ended unanswered, which is a wait that ran out or was cancelled. The closed
      // session frees whatever it took once the server sees it.
      if (e.code() == Errc::deadline_exceeded && wait &&
          (request.stop.stop_requested() || Clock::now() >= request.deadline)) {
        return std::nullopt;
      }
      throw;
    }
    Reply reply = std::move(*answered);
    if (reply.ok() && reply.rows() == 1 && !reply.null(0, 0) && reply.integer(0, 0) == -1) {
      // A name that has been a semaphore: the grant took nothing; the checked way
      // refuses it while the semaphore is in use.
      reply = conn->query_prepared(
          kCheckedName, checked_sql_,
          {Param::text(std::to_string(id)), Param::text(request.mode == Mode::shared ? "t" : "f"),
           Param::text(wait ? "t" : "f"), Param::text(std::to_string(wait_ms)),
           Param::text(std::to_string(ttl_ms)), Param::text(request.value.empty() ? "f" : "t"),
           Param::binary(request.value)},
          limits);
      if (reply.ok()) conn->set_idle_timeout_ms(ttl_ms);
    }
    if (!reply.ok()) {
      // A cancel can land after the lock was taken: free whatever the session holds.
      settle(std::move(conn));
      const std::string state = reply.sqlstate();
      if (state == kLockTimeout) return std::nullopt;
      if (state == kQueryCanceled &&
          (request.stop.stop_requested() || Clock::now() >= request.deadline)) {
        return std::nullopt;
      }
      throw_reply(reply, "acquiring " + request.key.joined());
    }
    if (reply.rows() == 0 || reply.null(0, 0)) {  // a try that found no room: nothing is held
      give_back(std::move(conn));
      return std::nullopt;
    }
    const auto token = reply.integer(0, 0);
    // The server's idle clock starts when the grant's reply is sent, which is no earlier
    // than our send. After a long wait that bound is stale: one more round trip restarts
    // the clock from a known time.
    auto from = sent;
    if (Clock::now() - sent > ttl / 4) {
      from = Clock::now();
      const Reply ping = conn->query("SELECT 1", {}, op_limits());
      if (!ping.ok()) {
        conn->close();
        throw_reply(ping, "confirming the grant of " + request.key.joined());
      }
    }
    auto held = std::make_shared<Held>();
    held->conn = std::move(conn);
    held->expires = from + ttl;
    const std::string owner = instance_ + '-' + std::to_string(++grants_);
    {
      std::lock_guard lock(mu_);
      held_.emplace(owner, held);
    }
    GrantRef grant{request.key, request.mode, static_cast<std::uint64_t>(token), ttl, owner};
    grant.permits = request.capacity > 0 ? request.permits : 0;
    return Granted{std::move(grant), held->expires};
  }

  bool proclaim(const GrantRef& grant, std::string_view value) override {
    const auto held = find(grant.owner);
    if (!held) return false;  // released, lost, or not a grant of this instance
    std::unique_lock lock(held->mu);
    if (!held->conn) return false;
    const auto marker = -static_cast<std::int64_t>(grant.token);
    std::optional<Reply> reply;
    try {
      // On the grant's own session, guarded by its term: a session that still holds the
      // marker is the leader; one that was ended holds nothing and cannot answer.
      reply.emplace(held->conn->query_prepared(
          kProclaimName, proclaim_sql_,
          {Param::text(std::to_string(id_of(grant.key))), Param::text(std::to_string(grant.token)),
           Param::binary(std::string(value)), Param::text(std::to_string(key_high(marker))),
           Param::text(std::to_string(key_low(marker)))},
          op_limits()));
    } catch (const Error& e) {
      if (e.code() != Errc::unavailable) throw;
      // The connection broke: the session is gone, and the lock with it.
      held->conn.reset();
      return false;
    }
    if (!reply->ok()) throw_reply(*reply, "proclaiming a value for " + grant.key.joined());
    return reply->rows() == 1;
  }

  std::vector<Renewed> renew(std::span<const GrantRef> grants) override {
    std::vector<Renewed> out;
    out.reserve(grants.size());
    for (const GrantRef& grant : grants) out.push_back(renew_one(grant));
    return out;
  }

  void release(const GrantRef& grant) override {
    const auto held = find(grant.owner);
    if (!held) return;  // released already, or not a grant of this instance
    std::unique_ptr<PgConnection> conn;
    {
      std::lock_guard lock(held->mu);
      conn = std::move(held->conn);
    }
    forget(grant.owner);
    if (!conn) return;
    try {
      const Reply reply = conn->query_prepared(kReleaseName, kReleaseSql, {}, op_limits());
      if (reply.ok()) {
        give_back(std::move(conn));
        return;
      }
    } catch (const Error& e) {
      // unavailable: the session is gone, and its locks with it. deadline_exceeded: the
      // connection is closed; the server frees the locks once it sees that, or a TTL
      // after the last renewal at the latest.
      if (e.code() == Errc::deadline_exceeded) throw;
      return;
    }
    conn->close();  // the reset failed: ending the session frees the locks
  }

  bool check(const Sequencer& sequencer) override {
    const auto marker = -static_cast<std::int64_t>(sequencer.token);
    if (sequencer.token == 0 || sequencer.token > static_cast<std::uint64_t>(INT64_MAX)) {
      return false;
    }
    auto conn = take();
    const Reply reply = conn->query(
        check_sql_,
        {Param::text(sequencer.group), Param::binary(sequencer.name),
         Param::text(pg_mode(sequencer.mode)), Param::text(std::to_string(key_high(marker))),
         Param::text(std::to_string(key_low(marker)))},
        op_limits());
    if (!reply.ok()) throw_reply(reply, "checking a sequencer");
    give_back(std::move(conn));
    return reply.text(0, 0) == "t";
  }

  LockStatus inspect(const core::LockKey& key) override {
    auto conn = take();
    LockStatus status = inspect_on(*conn, config_.schema, key, op_limits());
    give_back(std::move(conn));
    return status;
  }

  std::vector<LockSummary> list(std::string_view group) override {
    auto conn = take();
    auto locks = list_on(*conn, config_.schema, group, op_limits());
    give_back(std::move(conn));
    return locks;
  }

 private:
  QueryLimits op_limits() const {
    QueryLimits limits;
    limits.give_up_at = Clock::now() + config_.op_timeout;
    return limits;
  }

  // One round trip that takes a lock (or, for a name flagged as a semaphore, answers -1).
  Reply grant(PgConnection& conn, const AcquireRequest& request, std::int64_t id, bool wait,
              int wait_ms, int ttl_ms, bool elect, const QueryLimits& limits) {
    const GrantWait how = !wait          ? GrantWait::none
                          : wait_ms == 0 ? GrantWait::forever
                                         : GrantWait::timed;
    const bool set_ttl = conn.idle_timeout_ms() != ttl_ms;
    const GrantStatement& statement = grants_sql_[grant_index(request.mode, how, set_ttl, elect)];
    std::vector<Param> params{Param::text(std::to_string(id))};
    if (how == GrantWait::timed) params.push_back(Param::text(std::to_string(wait_ms)));
    if (set_ttl) params.push_back(Param::text(std::to_string(ttl_ms)));
    if (elect) params.push_back(Param::binary(request.value));
    Reply reply = conn.query_prepared(statement.name, statement.sql, params, limits);
    if (reply.ok() && set_ttl) conn.set_idle_timeout_ms(ttl_ms);
    return reply;
  }

  // One round trip: SCHEMA.acquire_permits (pg_schema.cc) queues in the semaphore's
  // turnstile and, at its head, waits server-side until the permits fit.
  Reply acquire_permits(PgConnection& conn, const AcquireRequest& request, std::int64_t id,
                        bool wait, int wait_ms, int ttl_ms, const QueryLimits& limits) {
    if (id >= kMaxSemaphoreLockId) {
      throw Error(Errc::resource_exhausted,
                  "postgres://: the registry's ids have outgrown the semaphores' key space");
    }
    const std::vector<Param> params{Param::text(std::to_string(id)),
                                    Param::text(std::to_string(request.capacity)),
                                    Param::text(std::to_string(request.permits)),
                                    Param::text(wait ? "t" : "f"),
                                    Param::text(std::to_string(wait_ms)),
                                    Param::text(std::to_string(ttl_ms))};
    for (int attempt = 0;; ++attempt) {
      Reply reply = conn.query_prepared(kPermitsName, permits_sql_, params, limits);
      if (!reply.ok() || reply.null(0, 0) || reply.integer(0, 0) != -1) {
        if (reply.ok()) conn.set_idle_timeout_ms(ttl_ms);
        return reply;
      }
      // The registry has another N for it (or none yet): the request took nothing.
      // Open it with ours, which works only while nobody is in it, and ask again.
      if (attempt == 3 || !set_permits(conn, config_.schema, id, request.capacity, op_limits())) {
        throw Error(Errc::invalid_argument,
                    "postgres://: " + request.key.joined() +
                        " is a semaphore in use with another number of permits than " +
                        std::to_string(request.capacity));
      }
    }
  }

  Renewed renew_one(const GrantRef& grant) {
    const auto held = find(grant.owner);
    if (!held) return Renewed::lost();  // not this instance's session: it cannot renew it
    std::unique_lock lock(held->mu);
    if (!held->conn) return Renewed::lost();
    const auto marker = -static_cast<std::int64_t>(grant.token);
    try {
      const auto sent = Clock::now();
      const Reply reply = held->conn->query(kHeldSql,
                                            {Param::text(std::to_string(key_high(marker))),
                                             Param::text(std::to_string(key_low(marker)))},
                                            op_limits());
      if (!reply.ok()) return Renewed::unknown();
      if (reply.rows() == 1) {
        held->expires = sent + grant.ttl;
        return Renewed::until(held->expires);
      }
    } catch (const Error&) {
      // The connection broke or was closed: the session, and the lock, are gone (or will
      // be, as soon as the server notices). Never held again by this grant.
    }
    held->conn.reset();
    lock.unlock();
    forget(grant.owner);
    return Renewed::lost();
  }

  std::shared_ptr<Held> find(const std::string& owner) {
    std::lock_guard lock(mu_);
    const auto it = held_.find(owner);
    return it == held_.end() ? nullptr : it->second;
  }

  void forget(const std::string& owner) {
    std::lock_guard lock(mu_);
    held_.erase(owner);
  }

  std::int64_t id_of(const core::LockKey& key) {
    {
      std::lock_guard lock(mu_);
      if (const auto id = ids_.find(key.joined())) return *id;
    }
    auto conn = take();
    const std::int64_t id = lock_id(*conn, config_.schema, key, op_limits());
    give_back(std::move(conn));
    std::lock_guard lock(mu_);
    ids_.put(key.joined(), id);
    return id;
  }

  // An idle session from the pool, or a new one. A pooled session that keeps a grant's
  // idle timeout is handed out only within half of it, never as the server ends it.
  std::unique_ptr<PgConnection> take() {
    {
      std::lock_guard lock(mu_);
      const auto now = Clock::now();
      while (!idle_.empty()) {
        auto conn = std::move(idle_.back());
        idle_.pop_back();
        if (now < conn->pooled_until && conn->alive()) return conn;
      }
    }
    return PgConnection::open(config_);
  }

  void give_back(std::unique_ptr<PgConnection> conn) {
    conn->pooled_until = conn->idle_timeout_ms() > 0
                             ? Clock::now() + milliseconds(conn->idle_timeout_ms()) / 2
                             : Clock::time_point::max();
    std::lock_guard lock(mu_);
    if (conn->usable() && idle_.size() < config_.pool) idle_.push_back(std::move(conn));
  }

  // After a failed grant round trip: unlock everything, end the lease clock, then pool
  // it again.
  void settle(std::unique_ptr<PgConnection> conn) {
    try {
      if (conn->query(kResetSql, {}, op_limits()).ok()) {
        conn->set_idle_timeout_ms(0);
        give_back(std::move(conn));
      }
    } catch (const Error&) {
      // Closed: the session's end freed anything it took.
    }
  }

  // grants_sql_ holds every variant: elect x mode x wait x set_ttl (a campaign is
  // exclusive, so its shared variants are never used).
  static std::size_t grant_index(Mode mode, GrantWait wait, bool set_ttl, bool elect) {
    return (elect ? 12 : 0) + (mode == Mode::shared ? 6 : 0) + static_cast<std::size_t>(wait) * 2 +
           (set_ttl ? 1 : 0);
  }
  static std::vector<GrantStatement> all_grants(const std::string& schema) {
    std::vector<GrantStatement> out;
    for (const bool elect : {false, true}) {
      for (const bool shared : {false, true}) {
        for (const GrantWait wait : {GrantWait::none, GrantWait::timed, GrantWait::forever}) {
          for (const bool set_ttl : {false, true}) {
            out.push_back(grant_statement(schema, shared, wait, set_ttl, elect));
          }
        }
      }
    }
    return out;
  }

  const PgConfig config_;
  const std::vector<GrantStatement> grants_sql_;  // by grant_index()
  const std::string check_sql_;
  const std::string permits_sql_;
  const std::string checked_sql_;
  const std::string proclaim_sql_;
  const std::string instance_;  // random: owners of other instances never match
  std::atomic<std::uint64_t> grants_{0};

  std::mutex mu_;
  std::vector<std::unique_ptr<PgConnection>> idle_;    // guarded by mu_
  std::map<std::string, std::shared_ptr<Held>> held_;  // by owner; guarded by mu_
  // "group/name" -> registry id, of the locks used lately; guarded by mu_. Bounded: a
  // client locking per-user names must not keep every id it ever used.
  core::RecentMap<std::string, std::int64_t> ids_;
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  auto engine = std::make_unique<PgEngine>(parse_config(uri, options));
  engine->setup();
  return engine;
}

}  // namespace warden::engines::postgres
