#include "engines/postgres/pg_engine.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <mutex>
#include <utility>

#include "core/client_id.h"
#include "core/recent_map.h"
#include "engines/postgres/pg_acquire.h"
#include "engines/postgres/pg_config.h"
#include "engines/postgres/pg_connection.h"
#include "engines/postgres/pg_schema.h"
#include "engines/postgres/pg_waits.h"
#include "warden/error.h"

namespace warden::engines::postgres {
namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;
using std::chrono::milliseconds;

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
        sql_(config_.schema),
        check_sql_(check_sql(config_.schema)),
        proclaim_sql_(proclaim_sql(config_.schema)),
        instance_(core::random_client_id()) {}

  // The waits' thread goes first: it calls into this engine until it has ended.
  ~PgEngine() override {
    if (waits_) waits_->stop();
  }

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
    const AcquireTerms terms = AcquireTerms::of(request, config_.op_timeout, Clock::now());
    AcquireSteps steps(sql_, request, id, terms);
    const auto sent = Clock::now();
    // Throws with the connection closed: the session, and whatever it took, is gone.
    try {
      for (auto statement = std::make_optional(steps.start(conn->idle_timeout_ms())); statement;) {
        const Reply reply =
            statement->name != nullptr
                ? conn->query_prepared(*statement->name, *statement->sql, statement->params,
                                       statement->waits ? terms.limits : op_limits())
                : conn->query(*statement->sql, statement->params,
                              statement->waits ? terms.limits : op_limits());
        if (!reply.ok()) {
          // A cancel can land after the lock was taken: free whatever the session holds.
          settle(std::move(conn));
          AcquireSql::ended_or_throw(reply, request);
          return std::nullopt;
        }
        statement = steps.next(reply, *conn);
      }
    } catch (const Error& e) {
      if (AcquireSql::ended_unanswered(e, request, terms)) return std::nullopt;
      throw;
    }
    if (!steps.token()) {  // a try that found no room: nothing is held
      give_back(std::move(conn));
      return std::nullopt;
    }
    // The server's idle clock starts when the grant's reply is sent, which is no earlier
    // than our send. After a long wait that bound is stale: one more round trip restarts
    // the clock from a known time.
    auto from = sent;
    if (Clock::now() - sent > request.options.ttl / 4) {
      from = Clock::now();
      const Reply ping = conn->query("SELECT 1", {}, op_limits());
      if (!ping.ok()) {
        conn->close();
        throw_reply(ping, "confirming the grant of " + request.key.joined());
      }
    }
    return keep(request, std::move(conn), *steps.token(), from);
  }

  // Waits on the waits' thread (pg_waits.h), with a session each but no thread.
  void acquire_async(AcquireRequest request, AcquireDone done) override {
    waits().acquire(std::move(request), std::move(done));
  }
  bool waits_without_threads() const override { return true; }

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
    auto conn = let_go(grant);
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

  // Makes the grant of `token` on `conn` this engine's: renewed and released on it.
  Granted keep(const AcquireRequest& request, std::unique_ptr<PgConnection> conn,
               std::int64_t token, Clock::time_point from) {
    auto held = std::make_shared<Held>();
    held->conn = std::move(conn);
    held->expires = from + request.options.ttl;
    const std::string owner = instance_ + '-' + std::to_string(++grants_);
    {
      std::lock_guard lock(mu_);
      held_.emplace(owner, held);
    }
    GrantRef grant{request.key, request.mode, static_cast<std::uint64_t>(token),
                   request.options.ttl, owner};
    grant.permits = request.capacity > 0 ? request.permits : 0;
    return Granted{std::move(grant), held->expires};
  }

  PgWaits& waits() {
    std::call_once(waits_started_, [this] {
      PgWaits::Host host;
      host.config = config_;
      host.sql = &sql_;
      host.sessions = config_.wait_sessions;
      host.known_id = [this](const core::LockKey& key) -> std::optional<std::int64_t> {
        std::lock_guard lock(mu_);
        if (const auto id = ids_.find(key.joined())) return *id;
        return std::nullopt;
      };
      host.learnt_id = [this](const core::LockKey& key, std::int64_t id) {
        std::lock_guard lock(mu_);
        ids_.put(key.joined(), id);
      };
      host.idle_session = [this] { return take_idle(); };
      host.pool = [this](std::unique_ptr<PgConnection> conn) { give_back(std::move(conn)); };
      host.keep = [this](const AcquireRequest& request, std::unique_ptr<PgConnection> conn,
                         std::int64_t token, Clock::time_point from) {
        return keep(request, std::move(conn), token, from);
      };
      waits_ = PgWaits::start(std::move(host));
    });
    return *waits_;
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

  // The session of `grant`, taken from its record, which is forgotten; null when this
  // instance holds no such grant (released already, lost, or another instance's).
  std::unique_ptr<PgConnection> let_go(const GrantRef& grant) {
    const auto held = find(grant.owner);
    if (!held) return nullptr;
    std::unique_ptr<PgConnection> conn;
    {
      std::lock_guard lock(held->mu);
      conn = std::move(held->conn);
    }
    forget(grant.owner);
    return conn;
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
    if (auto conn = take_idle()) return conn;
    return PgConnection::open(config_);
  }
  // An idle session from the pool, or null.
  std::unique_ptr<PgConnection> take_idle() {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    while (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      if (now < conn->pooled_until && conn->alive()) return conn;
    }
    return nullptr;
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

  const PgConfig config_;
  const AcquireSql sql_;
  const std::string check_sql_;
  const std::string proclaim_sql_;
  const std::string instance_;  // random: owners of other instances never match
  std::atomic<std::uint64_t> grants_{0};

  std::mutex mu_;
  std::vector<std::unique_ptr<PgConnection>> idle_;    // guarded by mu_
  std::map<std::string, std::shared_ptr<Held>> held_;  // by owner; guarded by mu_
  // "group/name" -> registry id, of the locks used lately; guarded by mu_. Bounded: a
  // client locking per-user names must not keep every id it ever used.
  core::RecentMap<std::string, std::int64_t> ids_;

  std::once_flag waits_started_;
  std::shared_ptr<PgWaits> waits_;  // stopped first in the destructor
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  auto engine = std::make_unique<PgEngine>(parse_config(uri, options));
  engine->setup();
  return engine;
}

}  // namespace warden::engines::postgres
