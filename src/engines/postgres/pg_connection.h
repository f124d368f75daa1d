// engines/postgres/pg_connection.h — one libpq connection (one server session) and the
// round trips the engine makes on it.
//
// Every query is sent asynchronously and waited for with poll(), so a wait can be
// cancelled (PQcancel, sent again every kCancelRepeat while the query runs, since a
// cancel that arrives before the query starts is ignored by the server) and a round trip
// can be abandoned at a deadline: the connection is then closed, which ends the session
// and with it every advisory lock it held. A connection is used by one thread at a time.
#pragma once

#include <libpq-fe.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "engines/postgres/pg_config.h"
#include "warden/types.h"

namespace warden::engines::postgres {

// How often a cancel is sent again while the statement it meant still runs.
inline constexpr std::chrono::milliseconds kCancelRepeat{100};

// One query parameter, sent as text unless `bytes` (a bytea, sent in binary).
struct Param {
  std::string value;
  bool bytes = false;
  static Param text(std::string v) { return Param{std::move(v), false}; }
  static Param binary(std::string v) { return Param{std::move(v), true}; }
};

// The result of one statement: rows, or the server's error with its SQLSTATE.
class Reply {
 public:
  explicit Reply(PGresult* result) : result_(result, &PQclear) {}
  bool ok() const;
  std::string sqlstate() const;  // "" when ok
  std::string message() const;   // the server's primary message
  int rows() const { return PQntuples(result_.get()); }
  bool null(int row, int column) const { return PQgetisnull(result_.get(), row, column) != 0; }
  std::string text(int row, int column) const;
  std::int64_t integer(int row, int column) const;  // Error(internal) if not one

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> result_;
};

struct QueryLimits {
  std::stop_token stop;  // cancels the query on the server (PQcancel)
  // PQcancel at this time too (a backstop for a server-side timeout).
  Clock::time_point cancel_at = Clock::time_point::max();
  // No answer by then: the connection is closed and Error(deadline_exceeded) thrown.
  Clock::time_point give_up_at = Clock::time_point::max();
  // Once a cancel was sent (a stop, or cancel_at), the answer is waited for this much
  // longer at most, then given up as above: a frozen server answers neither.
  Clock::duration after_cancel = Clock::duration::max();
};

class PgConnection {
 public:
  // Connects and logs in. Throws Error: permission_denied (credentials refused),
  // invalid_argument (no such database), resource_exhausted (too many connections),
  // unavailable (anything else).
  static std::unique_ptr<PgConnection> open(const PgConfig& config);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one statement with `params` ($1, $2, ...). Returns the server's reply, an error
  // reply included. Throws Error(unavailable) if the connection breaks (it is closed),
  // Error(deadline_exceeded) at limits.give_up_at.
  Reply query(const std::string& sql, const std::vector<Param>& params, const QueryLimits& limits);
  // Like query, for the statement prepared on this session as `name` (parameters sent
  // as text, typed by the server from `sql`). The first call on a session prepares it
  // (one more round trip, once).
  Reply query_prepared(const std::string& name, const std::string& sql,
                       const std::vector<Param>& params, const QueryLimits& limits);
  // Runs a statement list without parameters (the simple protocol: DDL in one round trip).
  Reply script(const std::string& sql, const QueryLimits& limits);

  // For one thread that waits on many sessions at once (pg_waits.h): a connection whose
  // login proceeds as connect_step() is called, a statement sent without waiting, and its
  // reply read as it comes. Connects without blocking; throws Error(resource_exhausted)
  // when libpq cannot allocate a connection.
  static std::unique_ptr<PgConnection> start(const PgConfig& config);
  // Takes the login a step further when socket() is ready for what events() says: true
  // once logged in. Throws Error as open() does when the login fails (the connection is
  // closed then).
  bool connect_step();
  // Sends `sql` with `params` and returns at once. Throws Error(unavailable) when the
  // connection is broken (it is closed then).
  void send(const std::string& sql, const std::vector<Param>& params);
  // Like send, for the statement prepared on this session as `name` (the first use
  // prepares it: its execute is sent once the prepare is answered, and the reply read
  // is the execute's, or the failed prepare's).
  void send_prepared(const std::string& name, const std::string& sql,
                     const std::vector<Param>& params);
  // Reads what arrived, without blocking: the reply once the statement's last result is
  // in, nullopt until then. Throws Error(unavailable) when the connection breaks.
  std::optional<Reply> reply_if_ready();
  // What poll() should wait for on socket(): POLLIN, and POLLOUT while a login or a send
  // needs the socket writable.
  short events() const { return wants_write_ ? static_cast<short>(POLLIN | POLLOUT) : POLLIN; }
  int socket() const { return conn_ ? PQsocket(conn_) : -1; }
  // Asks the server to cancel the running statement (see send_cancel below).
  void cancel() { send_cancel(); }

  bool usable() const { return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK; }
  // An idle connection the server has not closed meanwhile (it would have sent a FATAL
  // notice or EOF: read without blocking). Closes it otherwise.
  bool alive();
  void close();
  int backend_pid() const { return pid_; }

  // The idle_session_timeout the engine last set on this session (0: none, the server's
  // default), so that a grant with the same TTL need not set it again.
  int idle_timeout_ms() const { return idle_timeout_ms_; }
  void set_idle_timeout_ms(int ms) { idle_timeout_ms_ = ms; }
  // For the pool: a session with an idle timeout is handed out only until then.
  Clock::time_point pooled_until = Clock::time_point::max();

 private:
  explicit PgConnection(PGconn* conn);
  Reply finish(const QueryLimits& limits);
  [[noreturn]] void broken(const std::string& what);

  // Asks the server to cancel the running statement without waiting for it: PQcancel
  // blocks until the postmaster answers, as long as the server is frozen. It runs on a
  // thread of its own, with a cancel object of its own; one at a time per connection.
  void send_cancel();

  bool flush_pending();
  void send_execute(const std::string& name, const std::vector<Param>& params);
  struct Execute {
    std::string name;
    std::vector<Param> params;
  };
  [[noreturn]] void login_failed();

  PGconn* conn_;
  bool wants_write_ = false;     // login or send: poll() for POLLOUT too
  PGresult* pending_ = nullptr;  // reply_if_ready(): the results read so far
  std::optional<Execute> then_execute_;  // send_prepared(): sent once prepared
  std::shared_ptr<std::atomic<bool>> cancelling_ = std::make_shared<std::atomic<bool>>(false);
  int pid_;
  std::string describe_;  // start(): the server, for a failed login's message
  int idle_timeout_ms_ = 0;
  std::set<std::string> prepared_;  // statement names prepared on this session
  // What was sent last, for a message when its answer does not come: a prepared
  // statement's name, or the SQL's first words.
  std::string last_sent_;
};

// Error(...) for a failed reply: the code from its SQLSTATE, `what` and the server's
// message in the text.
[[noreturn]] void throw_reply(const Reply& reply, const std::string& what);

}  // namespace warden::engines::postgres
