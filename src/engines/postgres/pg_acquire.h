// engines/postgres/pg_acquire.h — what one acquire asks of PostgreSQL and what the
// answers mean, for the blocking acquire (pg_engine.cc), which sends each statement and
// waits, and the asynchronous waits (pg_waits.h), which send it and read the answer when
// it comes.
//
// An acquire is one statement on its own session (a lock's grant, or a semaphore's
// acquire_permits), and now and then one more: a name flagged as a semaphore answers -1
// and is asked again the checked way; a semaphore whose registry has another number of
// permits answers -1 and is asked again after set_permits.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/engine.h"
#include "engines/postgres/pg_connection.h"
#include "engines/postgres/pg_schema.h"

namespace warden::engines::postgres {

// The terms of one acquire, worked out once when it starts.
struct AcquireTerms {
  bool wait = false;  // false: a try
  int wait_ms = 0;    // a timed wait's lock_timeout; 0: for ever (or a try)
  int ttl_ms = 1;
  bool elect = false;  // a campaign: the grant also writes the candidate's value
  QueryLimits limits;  // the wait's stop, cancel_at and after_cancel; a try's give_up_at

  static AcquireTerms of(const core::AcquireRequest& request, std::chrono::milliseconds op_timeout,
                         Clock::time_point now);
};

// One statement of an acquire, prepared on its session under `name` when it has one
// (parameters as text, bytea in binary).
struct Statement {
  const std::string* name;
  const std::string* sql;
  std::vector<Param> params;
  // true: the wait's own statement, bounded by the terms' limits; false: a round trip
  // bounded by op_timeout.
  bool waits = true;
};

// What an acquire's grant or permits statement answered.
enum class Answer {
  granted,  // the token is the reply's
  none,     // a try found no room: nothing is held
  flagged,  // -1: a lock of a name flagged as a semaphore (ask checked()); a semaphore
            // whose registry has another number (set_permits, then ask again)
};

class AcquireSql {
 public:
  explicit AcquireSql(const std::string& schema);

  // The request's statement, for a session whose idle timeout is `idle_ms`.
  Statement first(const core::AcquireRequest& request, std::int64_t id, const AcquireTerms& terms,
                  int idle_ms) const;
  // A lock of a name that has been a semaphore: refused while the semaphore is in use.
  Statement checked(const core::AcquireRequest& request, std::int64_t id,
                    const AcquireTerms& terms) const;
  // What an ok reply to first() or checked() says; records on `conn` the idle timeout a
  // grant set (only a grant sets it: a try that found no room, or -1, set nothing).
  Answer answer(const Reply& reply, PgConnection& conn, const AcquireTerms& terms) const;
  // For a reply that is an error: returns if it ends the wait without a grant (it ran out,
  // or was cancelled), throws its Error otherwise.
  static void ended_or_throw(const Reply& reply, const core::AcquireRequest& request);
  // For a round trip that threw `e` (the session is closed): true if it ends the wait
  // without a grant (a wait past its deadline, or cancelled, that the server did not
  // answer), false when the error is the outcome.
  static bool ended_unanswered(const Error& e, const core::AcquireRequest& request,
                               const AcquireTerms& terms);
  // The error for a semaphore used with another number of permits than the registry's.
  static Error other_permits(const core::AcquireRequest& request);
  // Asked again at most this often after -1, once set_permits said true.
  static constexpr int kPermitsAttempts = 3;
  const std::string& set_permits_sql() const { return set_permits_sql_; }

 private:
  const std::string schema_;
  const std::vector<GrantStatement> grants_;  // by grant_index()
  const std::string permits_name_;
  const std::string permits_sql_;
  const std::string checked_name_;
  const std::string checked_sql_;
  const std::string set_permits_sql_;
};

// One acquire's statements in turn, for either way of sending them: start(), then after
// each ok reply next(), until it says the acquire is decided. An error reply is the
// acquire's end: AcquireSql::ended_or_throw says which.
class AcquireSteps {
 public:
  AcquireSteps(const AcquireSql& sql, const core::AcquireRequest& request, std::int64_t id,
               const AcquireTerms& terms)
      : sql_(sql), request_(request), id_(id), terms_(terms) {}

  // The first statement, for a session whose idle timeout is `idle_ms`.
  Statement start(int idle_ms) const { return sql_.first(request_, id_, terms_, idle_ms); }
  // After the ok `reply` to the last statement, on `conn`: the next statement, or nullopt
  // when the acquire is decided (token()). Throws Error(invalid_argument) for a semaphore
  // whose registry keeps another number of permits.
  std::optional<Statement> next(const Reply& reply, PgConnection& conn);
  // Once decided: the grant's token, or nullopt when nothing was granted.
  std::optional<std::int64_t> token() const { return token_; }

 private:
  const AcquireSql& sql_;
  const core::AcquireRequest& request_;
  const std::int64_t id_;
  const AcquireTerms& terms_;
  bool setting_permits_ = false;  // the last statement was set_permits
  int asked_again_ = 0;
  std::optional<std::int64_t> token_;
};

}  // namespace warden::engines::postgres
