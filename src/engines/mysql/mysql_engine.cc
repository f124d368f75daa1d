#include "engines/mysql/mysql_engine.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "core/client_id.h"
#include "core/recent_map.h"
#include "engines/mysql/connection.h"
#include "engines/mysql/mysql_config.h"
#include "engines/mysql/mysql_waits.h"
#include "engines/mysql/pool.h"
#include "engines/mysql/query_killer.h"
#include "engines/mysql/registry_schema.h"
#include "warden/error.h"

namespace warden::engines::mysql {
namespace {

using core::AcquireRequest;
using core::Granted;
using core::GrantRef;
using core::Renewed;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Reads the sequence's stored bound and commits a write, which flushes the redo log up
// to itself (make_durable).
constexpr const char* kDurableSql =
    "SELECT next_not_cached_value FROM warden_tokens; "
    "INSERT INTO warden_token_sync (k, n) VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1";

// GET_LOCK's timeout for a wait without a deadline: a year; a wait that outlasts it
// asks again (and queues again at the tail).
constexpr std::int64_t kForeverSeconds = 365LL * 24 * 3600;

// The server's idle limit for a session holding a lease of `ttl`: whole seconds,
// rounded up (the server can only be later than the client's own deadline).
seconds wait_timeout_for(milliseconds ttl) {
  return seconds(std::max<std::int64_t>(1, (ttl.count() + 999) / 1000));
}

// GET_LOCK's timeout (seconds, MariaDB takes fractions) for a wait until `deadline`.
std::string get_lock_timeout(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return std::to_string(kForeverSeconds);
  const auto now = Clock::now();
  if (deadline <= now) return "0";  // a try (min() included: no overflow)
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - now).count();
  if (left <= 0) return "0";
  const std::int64_t capped = std::min<std::int64_t>(left, kForeverSeconds * 1000);
  char text[32];
  const int n =
      std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(capped / 1000),
                    static_cast<long long>(capped % 1000));
  return std::string(text, static_cast<std::size_t>(n));
}

// A grant and the session that is its lease. The session holds two GET_LOCK locks: the
// lock's own name, and "NAME/TOKEN", which says to any other session which token the
// holder drew (check, status).
//
// A semaphore's grant holds instead its slot locks "NAME/s<i>" and the token lock: only
// the token lock is its own, so its renewal asks about that one.
struct Held {
  std::mutex mu;
  std::unique_ptr<Connection> connection;  // guarded by mu; null once the session ended
  std::string lock_name;                   // constant
  std::string renew_name;                  // constant: a lock only this grant holds
  bool semaphore = false;                  // constant: permits, not the lock itself
  std::uint64_t id = 0;                    // constant: the registry id
  std::uint64_t token = 0;                 // constant
  Clock::time_point expires;               // guarded by mu
  bool published = false;                  // guarded by mu: warden_holders has its row
};

class MysqlEngine final : public core::Engine {
 public:
  explicit MysqlEngine(MysqlConfig config)
      : pool_(std::move(config)), instance_(core::random_client_id()) {}

  // The waits' thread goes first: it uses the pool, the killer and this engine until it
  // has ended.
  ~MysqlEngine() override {
    if (waits_) waits_->stop();
  }

  void install() {
    pool_.with([&](Connection& c) {
      install_registry(c, pool_.config());
      return 0;
    });
  }

  Capabilities capabilities() const override {
    Capabilities caps;
    caps.shared = false;  // GET_LOCK has one mode
    caps.fair = true;     // the server grants GET_LOCK waiters in arrival order
    caps.non_fair = false;
    caps.lock_delay = false;
    caps.fencing = true;
    caps.durable_tokens = true;  // make_durable, before the grant is told
    caps.check = true;
    caps.semaphore = true;  // slot locks behind a FIFO turnstile (acquire_permits)
    caps.election = true;   // the value in warden_leaders, written with the grant
    return caps;
  }

  std::optional<Granted> acquire(const AcquireRequest& request) override {
    refuse_unsupported(request);
    if (request.capacity > 0) return acquire_permits(request);
    const std::uint64_t id = lock_id(request.key);
    const std::string name = pool_.config().lock_prefix() + std::to_string(id);
    const auto statement = [&](const std::string& timeout) {
      return grant_statement(request, id, timeout);
    };
    while (true) {
      auto attempt = run_grant(request, statement);
      if (!attempt) return std::nullopt;
      if (*attempt->result == "0") {  // GET_LOCK timed out: nothing left behind
        give_back(std::move(attempt->connection));
        if (request.deadline == Clock::time_point::max()) continue;
        return std::nullopt;
      }
      const std::uint64_t token = to_u64(attempt->result, "token");
      if (token == kIsSemaphore) {  // warden_grant released the lock again
        give_back(std::move(attempt->connection));
        throw Error(Errc::invalid_argument,
                    "mysql: " + request.key.joined() + " is a semaphore in use, not a lock");
      }
      return hold(request, std::move(*attempt), id, name, name, token, false);
    }
  }

  // Locks and campaigns wait on the waits' thread (mysql_waits.h), with a session each
  // but no thread; a semaphore's request still waits on a thread of its own (its N is
  // settled by several round trips first).
  void acquire_async(AcquireRequest request, AcquireDone done) override {
    try {
      refuse_unsupported(request);
    } catch (const Error&) {
      done(std::nullopt, std::current_exception());
      return;
    }
    if (request.capacity > 0) {
      Engine::acquire_async(std::move(request), std::move(done));
      return;
    }
    waits().acquire(std::move(request), std::move(done));
  }
  bool waits_without_threads() const override { return true; }

  // k permits of a semaphore of N: warden_take (registry_schema.cc) behind the N the
  // backend keeps for it (settle_capacity).
  std::optional<Granted> acquire_permits(const AcquireRequest& request) {
    const std::uint64_t id = lock_id(request.key);
    const std::string name = pool_.config().lock_prefix() + std::to_string(id);
    const auto statement = [&](const std::string& timeout) {
      return "SELECT warden_take('" + name + "', " + std::to_string(request.permits) + ", " +
             std::to_string(request.capacity) + ", " + timeout + ")";
    };
    // warden_take refuses (-2) an N other than the stored one; the stored N is then read
    // and settled again: another client re-opened the idle semaphore with its own N, or
    // did so between this client's settling and its turn at the turnstile.
    for (int settled = 0;; ++settled) {
      if (known_capacity(id) != request.capacity) settle_capacity(request, id, name);
      auto attempt = run_grant(request, statement);
      if (!attempt) return std::nullopt;
      const std::string& result = *attempt->result;
      if (result == "0") {
        give_back(std::move(attempt->connection));
        if (request.deadline == Clock::time_point::max()) continue;
        return std::nullopt;
      }
      if (result == "-1" || result == "-2") {  // warden_take released everything
        give_back(std::move(attempt->connection));
        if (result == "-1") {
          throw Error(Errc::invalid_argument,
                      "mysql: " + request.key.joined() + " is a lock held now, not a semaphore");
        }
        forget_capacity(id);
        if (settled >= 3) {
          throw Error(Errc::invalid_argument,
                      "mysql: the semaphore " + request.key.joined() +
                          " keeps being opened with another number of permits than " +
                          std::to_string(request.capacity));
        }
        continue;
      }
      const std::uint64_t token = to_u64(attempt->result, "token");
      auto granted = hold(request, std::move(*attempt), id, name,
                          name + '/' + std::to_string(token), token, true);
      granted.grant.mode = Mode::shared;
      granted.grant.permits = request.permits;
      return granted;
    }
  }

  // A grant reported lost is forgotten: the core never releases a lost grant, so a record
  // kept for it would stay for the client's life (a flapping network would pile them up),
  // and a release of it finds nothing, as for any grant the server no longer holds.
  std::vector<Renewed> renew(std::span<const GrantRef> grants) override {
    std::vector<Renewed> out;
    out.reserve(grants.size());
    std::vector<std::string> lost;
    for (const GrantRef& grant : grants) {
      const auto held = find(grant.owner);
      if (!held) {
        out.push_back(Renewed::lost());
        continue;
      }
      std::lock_guard lock(held->mu);
      if (!held->connection) {
        out.push_back(Renewed::lost());
        lost.push_back(grant.owner);
        continue;
      }
      const auto send = Clock::now();
      try {
        // A round trip on the grant's own session: it resets the server's idle clock,
        // and says whether the session still holds the lock. The first one also writes
        // the holders row that status starts from (mysql_inspect.cc).
        std::string sql = "SELECT IS_USED_LOCK('" + held->renew_name + "') = CONNECTION_ID()";
        if (!held->published && !held->semaphore) {
          sql += "; INSERT INTO warden_holders (id, holder, token) VALUES (" +
                 std::to_string(held->id) + ", CONNECTION_ID(), " + std::to_string(held->token) +
                 ") ON DUPLICATE KEY UPDATE holder = VALUES(holder), token = VALUES(token)";
        }
        const auto sets = held->connection->query(
            sql, send + std::min(grant.ttl, pool_.config().op_timeout), "renew");
        const bool still = sets.size() == 1 && sets[0].size() == 1 && sets[0][0].size() == 1 &&
                           sets[0][0][0] == "1";
        if (still) {
          held->published = true;
          held->expires = send + grant.ttl;
          out.push_back(Renewed::until(held->expires));
          continue;
        }
      } catch (const Error&) {
        // The session is unusable: the lease cannot be renewed on any other.
      }
      end_session(*held);
      out.push_back(Renewed::lost());
      lost.push_back(grant.owner);
    }
    for (const std::string& owner : lost) forget(owner);
    return out;
  }

  void release(const GrantRef& grant) override {
    const auto held = find(grant.owner);
    if (!held) return;  // not ours, or released already
    std::unique_lock lock(held->mu);
    if (!held->connection) {
      // The session ended without a confirmed release: the server frees the lock when
      // it notices, at the latest by the lease's end.
      if (Clock::now() < held->expires) {
        throw Error(Errc::unavailable,
                    "mysql: the session holding " + grant.key.joined() +
                        " was lost; the server frees the lock by the lease's end");
      }
      lock.unlock();
      forget(grant.owner);
      return;
    }
    try {
      // Both locks of the grant (the session holds no others). A holders row stays: the
      // token lock it names is gone, so status no longer believes it.
      held->connection->query("DO RELEASE_ALL_LOCKS()", Clock::now() + pool_.config().op_timeout,
                              "release");
    } catch (const Error&) {
      end_session(*held);
      throw;
    }
    auto connection = std::move(held->connection);
    lock.unlock();
    forget(grant.owner);
    // It keeps the grant's idle limit, so the next grant of that TTL need not set it;
    // the pool hands it out only well within that limit.
    const seconds idle = connection->wait_timeout();
    pool_.give_back(std::move(connection), idle);
  }

  bool proclaim(const GrantRef& grant, std::string_view value) override {
    const auto held = find(grant.owner);
    if (!held || held->semaphore) return false;
    std::lock_guard lock(held->mu);
    if (!held->connection) return false;
    // On the grant's own session, and only while it holds the lock and the token lock
    // of its term: a leader replaced while it was paused has lost its session, and with
    // it the right to write.
    const std::string mine = "IS_USED_LOCK('" + held->lock_name +
                             "') = CONNECTION_ID() AND "
                             "IS_USED_LOCK('" +
                             held->lock_name + '/' + std::to_string(held->token) +
                             "') = CONNECTION_ID()";
    try {
      const auto sets = held->connection->query(
          "INSERT INTO warden_leaders (id, token, value) SELECT " + std::to_string(held->id) +
              ", " + std::to_string(held->token) + ", " + hex_literal(value) + " FROM DUAL WHERE " +
              mine +
              " ON DUPLICATE KEY UPDATE token = VALUES(token), value = VALUES(value); SELECT " +
              mine,
          Clock::now() + pool_.config().op_timeout, "proclaim " + grant.key.joined());
      return sets.size() == 1 && sets[0].size() == 1 && sets[0][0].size() == 1 &&
             sets[0][0][0] == "1";
    } catch (const Error&) {
      // The session is gone (or cannot be trusted any more): so is the leadership.
      end_session(*held);
      return false;
    }
  }

  bool check(const Sequencer& sequencer) override {
    // Exclusive: true while one session holds both the lock and its token lock
    // "NAME/TOKEN": the session that drew the token, which still holds the lock. Shared
    // (a semaphore's grant): while a session holds the token lock but not the lock — a
    // grant of permits keeps its token lock as long as its slots.
    const std::string lock = "CONCAT('" + pool_.config().lock_prefix() + "', id)";
    const std::string token_lock =
        "IS_USED_LOCK(CONCAT(" + lock + ", '/" + std::to_string(sequencer.token) + "'))";
    const std::string test = sequencer.mode == Mode::exclusive
                                 ? "IS_USED_LOCK(" + lock + ") = " + token_lock
                                 : token_lock + " IS NOT NULL AND NOT (IS_USED_LOCK(" + lock +
                                       ") <=> " + token_lock + ")";
    return pool_.with([&](Connection& c) {
      const auto sets = c.query(
          "SELECT " + test + " FROM warden_locks WHERE grp = " + hex_literal(sequencer.group) +
              " AND name = " + hex_literal(sequencer.name),
          Clock::now() + pool_.config().op_timeout, "check");
      return sets.size() == 1 && sets[0].size() == 1 && sets[0][0].size() == 1 &&
             sets[0][0][0] == "1";
    });
  }

  LockStatus inspect(const core::LockKey& key) override { return inspect_on(pool_, key); }

  std::vector<LockSummary> list(std::string_view group) override { return list_on(pool_, group); }

 private:
  static void refuse_unsupported(const AcquireRequest& request) {
    if (request.options.fairness == Fairness::non_fair) {
      throw Error(Errc::unsupported,
                  "mysql:// cannot barge: the server queues GET_LOCK waiters in order");
    }
    if (request.options.lock_delay.count() > 0) {
      throw Error(Errc::unsupported, "mysql:// has no lock-delay");
    }
    if (request.capacity == 0 && request.mode == Mode::shared) {
      throw Error(Errc::unsupported, "mysql:// has no shared mode: GET_LOCK is exclusive only");
    }
  }

  // GET_LOCK, and only if it granted, the token and the token lock (registry_schema.h).
  // The server shows the waiter in state "User lock" with this statement's text.
  //
  // A campaign's session first takes its leader mark "NAME/e<SESSION>" (its own: no
  // other session ever asks for it), and its value is written right behind the grant,
  // in the same round trip; a grant that did not happen drops the mark again. The mark
  // is how status tells a leader whose row is not committed yet (read again) from a
  // lock's holder (no value): mysql_inspect.cc.
  std::string grant_statement(const AcquireRequest& request, std::uint64_t id,
                              const std::string& timeout) const {
    const std::string name = pool_.config().lock_prefix() + std::to_string(id);
    const std::string grant = "warden_grant('" + name + "', " + timeout + ")";
    if (request.value.empty()) return "SELECT " + grant;
    const std::string mark = "CONCAT('" + name + "/e', CONNECTION_ID())";
    return "DO GET_LOCK(" + mark + ", 0); SELECT @warden_t := " + grant +
           "; INSERT INTO warden_leaders (id, token, value) SELECT " + std::to_string(id) +
           ", @warden_t, " + hex_literal(request.value) +
           " FROM DUAL WHERE @warden_t BETWEEN 1 AND 9223372036854775807 "
           "ON DUPLICATE KEY UPDATE token = VALUES(token), value = VALUES(value); "
           "DO IF(@warden_t BETWEEN 1 AND 9223372036854775807, 0, RELEASE_LOCK(" +
           mark + "))";
  }

  // The statement of a grant's round trip on a session whose idle limit is
  // `session_idle`: it sets the TTL's first when that differs.
  std::string grant_round_trip(const std::string& statement, std::chrono::seconds session_idle,
                               std::chrono::seconds idle) const {
    std::string sql;
    if (session_idle != idle) sql = "SET SESSION wait_timeout = " + std::to_string(idle.count()) + "; ";
    return sql + statement;
  }

  MysqlWaits& waits() {
    std::call_once(waits_started_, [this] {
      MysqlWaits::Host host;
      host.pool = &pool_;
      host.killer = &killer_;
      host.known_id = [this](const core::LockKey& key) -> std::optional<std::uint64_t> {
        std::lock_guard lock(mu_);
        if (const auto id = ids_.find(key.joined())) return *id;
        return std::nullopt;
      };
      host.learnt_id = [this](const core::LockKey& key, std::uint64_t id) {
        std::lock_guard lock(mu_);
        ids_.put(key.joined(), id);
      };
      host.grant_sql = [this](const AcquireRequest& request, std::uint64_t id,
                              seconds session_idle) {
        return grant_round_trip(grant_statement(request, id, get_lock_timeout(request.deadline)),
                                session_idle, wait_timeout_for(request.options.ttl));
      };
      host.idle_for = &wait_timeout_for;
      host.durable_sql = [this](std::uint64_t token) -> std::optional<std::string> {
        if (token <= durable_.load()) return std::nullopt;
        return std::string(kDurableSql);
      };
      host.durable_answer = [this](const std::vector<ResultSet>& sets, std::uint64_t token) {
        durable_answer(sets, token);
      };
      host.hold = [this](const AcquireRequest& request, std::unique_ptr<Connection> connection,
                         std::uint64_t id, std::uint64_t token, Clock::time_point send) {
        const std::string name = pool_.config().lock_prefix() + std::to_string(id);
        return keep(request, Attempt{std::move(connection), std::to_string(token), send}, id,
                    name, name, token, false);
      };
      waits_ = MysqlWaits::start(std::move(host));
    });
    return *waits_;
  }

  // The lock's registry id, created on first use; cached, since it never changes.
  std::uint64_t lock_id(const core::LockKey& key) {
    const std::string joined = key.joined();
    {
      std::lock_guard lock(mu_);
      if (const auto id = ids_.find(joined)) return *id;
    }
    const std::uint64_t id = pool_.with([&](Connection& c) {
      const auto sets = c.query("INSERT INTO warden_locks (grp, name) VALUES (" +
                                    hex_literal(key.group) + ", " + hex_literal(key.name) +
                                    ") ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id); "
                                    "SELECT LAST_INSERT_ID()",
                                Clock::now() + pool_.config().op_timeout, "register " + joined);
      if (sets.size() != 1 || sets[0].size() != 1 || sets[0][0].size() != 1) {
        throw Error(Errc::internal, "mysql: unexpected reply while registering " + joined);
      }
      return to_u64(sets[0][0][0], "lock id");
    });
    std::lock_guard lock(mu_);
    ids_.put(joined, id);
    return id;
  }

  // A grant statement's outcome: the session it ran on and the statement's value.
  struct Attempt {
    std::unique_ptr<Connection> connection;
    Field result;  // never NULL
    Clock::time_point send;
  };

  // Runs statement(timeout) on a session of its own, bounded by the request's deadline
  // and cancelled by its stop (KILL QUERY). nullopt for a killed or cancelled wait:
  // the session is then closed, and with it anything it may hold.
  std::optional<Attempt> run_grant(
      const AcquireRequest& request,
      const std::function<std::string(const std::string&)>& statement) {
    const seconds idle = wait_timeout_for(request.options.ttl);
    std::unique_ptr<Connection> connection = pool_.take();
    const std::uint64_t session = connection->id();
    const auto send = Clock::now();
    // The session keeps the idle limit it was last given (pooled sessions too): it is
    // set again only for a grant of another TTL.
    const std::string sql = grant_round_trip(statement(get_lock_timeout(request.deadline)),
                                             connection->wait_timeout(), idle);
    // The reply is bounded by GET_LOCK's own timeout; op_timeout more for the round trip.
    const auto reply_by = request.deadline == Clock::time_point::max()
                              ? Clock::time_point::max()
                              : std::max(request.deadline, send) + pool_.config().op_timeout;
    std::vector<ResultSet> sets;
    try {
      // A stop asks for KILL QUERY (sent by killer_, not waited for) and waits op_timeout
      // more for the killed statement's reply; then the session is closed.
      sets = connection->query(
          sql, reply_by, "acquire " + request.key.joined(), request.stop,
          [&] { killer_.kill(session); }, pool_.config().op_timeout);
    } catch (const Error& e) {
      if (request.stop.stop_requested()) {
        withdraw(std::move(connection));
        return std::nullopt;
      }
      if (e.code() == Errc::deadline_exceeded && request.deadline > send &&
          Clock::now() >= request.deadline) {
        // No reply by the deadline and op_timeout more (a frozen or cut-off server): the
        // wait ran out. The closed session frees whatever it took once the server sees it.
        pool_.discard(std::move(connection));
        return std::nullopt;
      }
      // Never sent again on another session: the request may have waited in the
      // server's queue, and a second one would wait at its tail (pool_.take already
      // left out an idle session the server had hung up on).
      pool_.discard(std::move(connection));  // whatever it held ends with it
      throw;
    }
    connection->set_wait_timeout(idle);
    const Field* got =
        !sets.empty() && sets[0].size() == 1 && sets[0][0].size() == 1 ? &sets[0][0][0] : nullptr;
    if (got == nullptr) {
      pool_.discard(std::move(connection));
      throw Error(Errc::internal, "mysql: unexpected reply to an acquire");
    }
    if (!*got || request.stop.stop_requested()) {
      // Killed (NULL), or cancelled just as it was granted.
      withdraw(std::move(connection));
      return std::nullopt;
    }
    return Attempt{std::move(connection), *got, send};
  }

  // Ends a cancelled wait's claims before the caller hears of the cancel: what the
  // session holds (a semaphore's turnstile and the slots it took, a grant that came with
  // the stop) is released on it, and its reply means the killed statement has ended on
  // the server too, so status no longer shows it waiting. Closing the session alone
  // would leave both to the server, which tears a closed session down when it gets to
  // it. A session that cannot say so is closed.
  void withdraw(std::unique_ptr<Connection> connection) {
    if (connection->usable()) {
      try {
        connection->query("DO RELEASE_ALL_LOCKS()", Clock::now() + pool_.config().op_timeout,
                          "withdraw a cancelled wait");
        give_back(std::move(connection));
        return;
      } catch (const Error&) {
        // Closed below: whatever it holds ends with it.
      }
    }
    pool_.discard(std::move(connection));
  }

  // Makes `token`, just drawn on attempt's session, a grant of this client.
  Granted hold(const AcquireRequest& request, Attempt attempt, std::uint64_t id,
               const std::string& name, const std::string& renew_name, std::uint64_t token,
               bool semaphore) {
    try {
      make_durable(*attempt.connection, token);
    } catch (const Error&) {
      pool_.discard(std::move(attempt.connection));  // the grant ends untold
      throw;
    }
    return keep(request, std::move(attempt), id, name, renew_name, token, semaphore);
  }

  // The grant of `token`, durable, on attempt's session: the engine's from now on.
  Granted keep(const AcquireRequest& request, Attempt attempt, std::uint64_t id,
               const std::string& name, const std::string& renew_name, std::uint64_t token,
               bool semaphore) {
    auto held = std::make_shared<Held>();
    held->connection = std::move(attempt.connection);
    held->lock_name = name;
    held->renew_name = renew_name;
    held->semaphore = semaphore;
    held->id = id;
    held->token = token;
    held->expires = attempt.send + request.options.ttl;
    const std::string owner = instance_ + '-' + std::to_string(++grants_);
    {
      std::lock_guard lock(mu_);
      held_[owner] = held;
    }
    return Granted{GrantRef{request.key, Mode::exclusive, token, request.options.ttl, owner},
                   held->expires};
  }

  // A session that holds nothing (again) goes back to the pool with its idle limit.
  void give_back(std::unique_ptr<Connection> connection) {
    const seconds idle = connection->wait_timeout();
    pool_.give_back(std::move(connection), idle);
  }

  std::uint32_t known_capacity(std::uint64_t id) {
    std::lock_guard lock(mu_);
    return capacities_.find(id).value_or(0);
  }

  void forget_capacity(std::uint64_t id) {
    std::lock_guard lock(mu_);
    capacities_.erase(id);
  }

  // Makes the backend's N for the semaphore `name` the request's, or refuses: a
  // semaphore in use (its turnstile or a slot held) keeps its N, and a lock held keeps
  // its name. Writes (and commits) the row before warden_take runs, which the plain
  // grant's test relies on (registry_schema.cc, warden_grant). Throws
  // Error(invalid_argument) having changed nothing.
  void settle_capacity(const AcquireRequest& request, std::uint64_t id, const std::string& name) {
    const auto deadline = [&] { return Clock::now() + pool_.config().op_timeout; };
    const std::string what = "open the semaphore " + request.key.joined();
    // A refusal is returned, not thrown, so that the session goes back to the pool.
    const std::string refused = pool_.with([&](Connection& c) -> std::string {
      // Who uses the names is read first, and the stored N by a later statement (a
      // snapshot of its own): N is written and committed before the turnstile is taken,
      // so a turnstile seen in use has its N in that read. Read in one statement, a
      // snapshot older than the turnstile could show no row for a semaphore being opened
      // with this very N, which would be refused as another N in use.
      auto sets = c.query("SELECT IS_USED_LOCK('" + name + "'), IS_USED_LOCK('" + name +
                              "/t'); SELECT capacity FROM warden_semaphores WHERE id = " +
                              std::to_string(id),
                          deadline(), what);
      if (sets.size() != 2 || sets[0].size() != 1 || sets[0][0].size() != 2 ||
          sets[1].size() > 1 || (sets[1].size() == 1 && sets[1][0].size() != 1)) {
        throw Error(Errc::internal, "mysql: unexpected reply while opening a semaphore");
      }
      const Row users = sets[0][0];
      if (users[0]) return request.key.joined() + " is a lock held now, not a semaphore";
      const std::uint32_t stored =
          sets[1].empty() || !sets[1][0][0]
              ? 0
              : static_cast<std::uint32_t>(to_u64(sets[1][0][0], "number of permits"));
      if (stored != request.capacity) {
        bool in_use = static_cast<bool>(users[1]);
        if (!in_use && stored > 0) {
          sets = c.query("SELECT COUNT(*) FROM seq_0_to_" + std::to_string(stored - 1) +
                             " WHERE IS_USED_LOCK(CONCAT('" + name + "/s', seq)) IS NOT NULL",
                         deadline(), what);
          in_use = sets.size() == 1 && sets[0].size() == 1 && sets[0][0].size() == 1 &&
                   sets[0][0][0] != "0";
        }
        if (in_use) {
          return "the semaphore " + request.key.joined() + " has " + std::to_string(stored) +
                 " permits while in use, not " + std::to_string(request.capacity);
        }
        c.query("INSERT INTO warden_semaphores (id, capacity) VALUES (" + std::to_string(id) +
                    ", " + std::to_string(request.capacity) +
                    ") ON DUPLICATE KEY UPDATE capacity = VALUES(capacity)",
                deadline(), what);
      }
      return {};
    });
    if (!refused.empty()) throw Error(Errc::invalid_argument, "mysql: " + refused);
    std::lock_guard lock(mu_);
    capacities_.put(id, request.capacity);
  }

  void forget_id(const core::LockKey& key) {
    std::lock_guard lock(mu_);
    ids_.erase(key.joined());
  }

  // Tokens. NEXTVAL writes the sequence's table once per kTokenCache values, and that
  // write reaches the disk only with the next redo log flush; a server crashed before
  // it starts again below tokens already drawn. So before telling a token above
  // durable_, the grant's session reads the sequence's stored bound (every value below it
  // is covered by a write that is in the redo log already) and commits an update, which
  // flushes the log up to itself: the bound is durable, and a restarted server hands out
  // nothing below it. One extra round trip per kTokenCache tokens (and at the first grant).
  void make_durable(Connection& connection, std::uint64_t token) {
    if (token <= durable_.load()) return;
    durable_answer(
        connection.query(kDurableSql, Clock::now() + pool_.config().op_timeout,
                         "make tokens durable"),
        token);
  }
  // What kDurableSql's reply says for `token`: throws Error when it cannot vouch for it.
  void durable_answer(const std::vector<ResultSet>& sets, std::uint64_t token) {
    if (sets.size() != 1 || sets[0].size() != 1 || sets[0][0].size() != 1) {
      throw Error(Errc::internal, "mysql: unexpected reply while making tokens durable");
    }
    const std::uint64_t bound = to_u64(sets[0][0][0], "sequence bound");
    if (bound <= token) {
      throw Error(Errc::internal, "mysql: warden_tokens stores " + std::to_string(bound) +
                                      ", not above token " + std::to_string(token) +
                                      " it handed out");
    }
    std::uint64_t known = durable_.load();
    while (known < bound - 1 && !durable_.compare_exchange_weak(known, bound - 1)) {
    }
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

  // Closes a grant's session; held->mu must be held.
  void end_session(Held& held) {
    if (held.connection) pool_.discard(std::move(held.connection));
  }

  Pool pool_;
  QueryKiller killer_{pool_};  // after pool_: stopped before the pool goes
  std::once_flag waits_started_;
  std::shared_ptr<MysqlWaits> waits_;  // stopped first in the destructor
  // Owners are this instance's random id and a count: renew and release act only on
  // grants in held_, whose sessions are the lease the server enforces.
  const std::string instance_;
  std::atomic<std::uint64_t> grants_{0};
  std::atomic<std::uint64_t> durable_{0};  // no token up to it can be drawn again
  std::mutex mu_;
  // Of the locks used lately, bounded (a client locking per-user names must not keep
  // every one it ever used); guarded by mu_. A miss asks the server again.
  core::RecentMap<std::string, std::uint64_t> ids_;
  core::RecentMap<std::uint64_t, std::uint32_t> capacities_;  // N last settled
  std::map<std::string, std::shared_ptr<Held>> held_;         // guarded by mu_; by owner
};

}  // namespace

std::unique_ptr<core::Engine> open(const core::Uri& uri, const ClientOptions& options) {
  auto engine = std::make_unique<MysqlEngine>(parse_config(uri, options));
  engine->install();
  return engine;
}

}  // namespace warden::engines::mysql
