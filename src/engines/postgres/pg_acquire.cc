#include "engines/postgres/pg_acquire.h"

#include <algorithm>
#include <climits>

#include "warden/error.h"

namespace warden::engines::postgres {
namespace {

using std::chrono::milliseconds;

constexpr const char* kLockTimeout = "55P03";    // lock_not_available: lock_timeout fired
constexpr const char* kQueryCanceled = "57014";  // our cancel
// A cancelled timed wait: PostgreSQL's lock_timeout should end it first; this is later.
constexpr milliseconds kCancelGrace{200};

// grants_ holds every variant: elect x mode x wait x set_ttl (a campaign is exclusive, so
// its shared variants are never used).
std::size_t grant_index(Mode mode, GrantWait wait, bool set_ttl, bool elect) {
  return (elect ? 12 : 0) + (mode == Mode::shared ? 6 : 0) + static_cast<std::size_t>(wait) * 2 +
         (set_ttl ? 1 : 0);
}

std::vector<GrantStatement> all_grants(const std::string& schema) {
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

std::string text(bool value) { return value ? "t" : "f"; }

}  // namespace

AcquireTerms AcquireTerms::of(const core::AcquireRequest& request, milliseconds op_timeout,
                              Clock::time_point now) {
  AcquireTerms terms;
  terms.wait = request.deadline > now;
  terms.limits.stop = request.stop;
  // A cancel (a stop, or the deadline's backstop) the server does not answer within
  // op_timeout ends the wait: a frozen server holds no call past it.
  terms.limits.after_cancel = op_timeout;
  if (!terms.wait) {
    terms.limits.give_up_at = now + op_timeout;
  } else if (request.deadline != Clock::time_point::max()) {
    const auto left = std::chrono::ceil<milliseconds>(request.deadline - now).count();
    terms.wait_ms = static_cast<int>(std::clamp<std::int64_t>(left, 1, INT_MAX));
    terms.limits.cancel_at = request.deadline + kCancelGrace;
  }
  terms.ttl_ms =
      static_cast<int>(std::clamp<std::int64_t>(request.options.ttl.count(), 1, INT_MAX));
  terms.elect = request.capacity == 0 && request.mode == Mode::exclusive && !request.value.empty();
  return terms;
}

AcquireSql::AcquireSql(const std::string& schema)
    : schema_(schema),
      grants_(all_grants(schema)),
      permits_name_("warden_permits"),
      permits_sql_("SELECT " + quoted(schema) +
                   ".acquire_permits($1::bigint, $2::integer, $3::integer, $4::boolean, "
                   "$5::integer, $6::integer)"),
      checked_name_("warden_lock_checked"),
      checked_sql_("SELECT " + quoted(schema) +
                   ".lock_checked($1::bigint, $2::boolean, $3::boolean, $4::integer, "
                   "$5::integer, $6::boolean, $7::bytea)"),
      set_permits_sql_(postgres::set_permits_sql(schema)) {}

Statement AcquireSql::first(const core::AcquireRequest& request, std::int64_t id,
                            const AcquireTerms& terms, int idle_ms) const {
  if (request.capacity > 0) {
    // SCHEMA.acquire_permits (pg_schema.cc) queues in the semaphore's turnstile and, at
    // its head, waits server-side until the permits fit.
    if (id >= kMaxSemaphoreLockId) {
      throw Error(Errc::resource_exhausted,
                  "postgres://: the registry's ids have outgrown the semaphores' key space");
    }
    return Statement{
        &permits_name_,
        &permits_sql_,
        {Param::text(std::to_string(id)), Param::text(std::to_string(request.capacity)),
         Param::text(std::to_string(request.permits)), Param::text(text(terms.wait)),
         Param::text(std::to_string(terms.wait_ms)), Param::text(std::to_string(terms.ttl_ms))}};
  }
  const GrantWait how = !terms.wait          ? GrantWait::none
                        : terms.wait_ms == 0 ? GrantWait::forever
                                             : GrantWait::timed;
  const bool set_ttl = idle_ms != terms.ttl_ms;
  const GrantStatement& grant = grants_[grant_index(request.mode, how, set_ttl, terms.elect)];
  Statement out{&grant.name, &grant.sql, {Param::text(std::to_string(id))}};
  if (how == GrantWait::timed) out.params.push_back(Param::text(std::to_string(terms.wait_ms)));
  if (set_ttl) out.params.push_back(Param::text(std::to_string(terms.ttl_ms)));
  if (terms.elect) out.params.push_back(Param::binary(request.value));
  return out;
}

Statement AcquireSql::checked(const core::AcquireRequest& request, std::int64_t id,
                              const AcquireTerms& terms) const {
  return Statement{
      &checked_name_,
      &checked_sql_,
      {Param::text(std::to_string(id)), Param::text(text(request.mode == Mode::shared)),
       Param::text(text(terms.wait)), Param::text(std::to_string(terms.wait_ms)),
       Param::text(std::to_string(terms.ttl_ms)), Param::text(text(!request.value.empty())),
       Param::binary(request.value)}};
}

Answer AcquireSql::answer(const Reply& reply, PgConnection& conn, const AcquireTerms& terms) const {
  if (reply.rows() == 0 || reply.null(0, 0)) return Answer::none;
  if (reply.integer(0, 0) == -1) return Answer::flagged;
  conn.set_idle_timeout_ms(terms.ttl_ms);
  return Answer::granted;
}

void AcquireSql::ended_or_throw(const Reply& reply, const core::AcquireRequest& request) {
  const std::string state = reply.sqlstate();
  if (state == kLockTimeout) return;
  if (state == kQueryCanceled &&
      (request.stop.stop_requested() || Clock::now() >= request.deadline)) {
    return;
  }
  throw_reply(reply, "acquiring " + request.key.joined());
}

bool AcquireSql::ended_unanswered(const Error& e, const core::AcquireRequest& request,
                                  const AcquireTerms& terms) {
  // The server answered neither the wait nor its cancel (frozen, or cut off): the wait
  // ended unanswered, which is a wait that ran out or was cancelled. The closed session
  // frees whatever it took once the server sees it.
  return e.code() == Errc::deadline_exceeded && terms.wait &&
         (request.stop.stop_requested() || Clock::now() >= request.deadline);
}

Error AcquireSql::other_permits(const core::AcquireRequest& request) {
  return Error(Errc::invalid_argument,
               "postgres://: " + request.key.joined() +
                   " is a semaphore in use with another number of permits than " +
                   std::to_string(request.capacity));
}

std::optional<Statement> AcquireSteps::next(const Reply& reply, PgConnection& conn) {
  if (setting_permits_) {
    setting_permits_ = false;
    if (!permits_set(reply)) throw AcquireSql::other_permits(request_);
    return start(conn.idle_timeout_ms());
  }
  switch (sql_.answer(reply, conn, terms_)) {
    case Answer::granted:
      token_ = reply.integer(0, 0);
      return std::nullopt;
    case Answer::none:
      return std::nullopt;
    case Answer::flagged:
      break;
  }
  if (request_.capacity == 0) return sql_.checked(request_, id_, terms_);
  // The registry has another N for the semaphore (or none yet): the request took
  // nothing. Open it with ours, which works only while nobody is in it, and ask again.
  if (++asked_again_ > AcquireSql::kPermitsAttempts) throw AcquireSql::other_permits(request_);
  setting_permits_ = true;
  return Statement{nullptr, &sql_.set_permits_sql(), set_permits_params(id_, request_.capacity),
                   false};
}

}  // namespace warden::engines::postgres
