// engines/mysql/connection.h — one session with the server through libmariadb's
// non-blocking API, so that every call has a deadline and a wait can be cancelled.
//
// A session is what holds GET_LOCK locks: when it ends (closed, killed, or idle past
// its wait_timeout) the server frees them. A Connection is used by one thread at a
// time; it is not thread-safe. Server errors become warden::Error in errors.cc, the one
// place that translates them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "engines/mysql/mysql_config.h"
#include "warden/types.h"

struct st_mysql;
struct st_mysql_res;

namespace warden::engines::mysql {

using Field = std::optional<std::string>;  // nullopt for SQL NULL
using Row = std::vector<Field>;
using ResultSet = std::vector<Row>;

// An eventfd written when a stop is requested: a wait on the socket wakes up for it.
class Waker {
 public:
  Waker();  // throws Error(resource_exhausted)
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;
  int fd() const { return fd_; }
  void wake() const;
  void drain() const;  // forgets earlier wake-ups

 private:
  int fd_;
};

class Connection {
 public:
  // Connects and selects the database, bounded by config.op_timeout. Throws Error
  // (permission_denied for refused credentials, invalid_argument for an unknown
  // database, unavailable / deadline_exceeded when the server cannot be reached).
  explicit Connection(const MysqlConfig& config);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The server's id of this session (CONNECTION_ID(), the id KILL takes).
  std::uint64_t id() const { return id_; }
  // false once a call failed in a way that leaves the session unusable (lost, timed
  // out, cancelled mid-reply); such a connection is closed and never reused.
  bool usable() const { return usable_; }

  // The session's wait_timeout as the engine last set it (0: never set, the server's
  // default), so that a pooled session is not given the same idle limit again.
  std::chrono::seconds wait_timeout() const { return wait_timeout_; }
  void set_wait_timeout(std::chrono::seconds limit) { wait_timeout_ = limit; }

  // Runs `sql` (one or several statements separated by ';') and returns the rows of
  // every result set, in order; statements without a result set add none. Waits for the
  // reply until `deadline`; past it, the connection is closed and
  // Error(deadline_exceeded) thrown. When `stop` is requested first, `on_stop` runs once
  // (on this thread; it should make the server end the statement early, e.g. KILL
  // QUERY) and the reply is then awaited for at most `grace`; a reply that does not come
  // closes the connection and throws Error(deadline_exceeded). Throws Error for a server error
  // (`what` says which operation failed).
  std::vector<ResultSet> query(std::string_view sql, Clock::time_point deadline,
                               std::string_view what, std::stop_token stop = {},
                               const std::function<void()>& on_stop = {},
                               Clock::duration grace = std::chrono::seconds(5));

  // Ends the session now (the server frees its locks once it sees the socket close).
  void close();

  // For one thread that polls many sessions (mysql_waits.h). A session whose login goes
  // on as connect_resume() is called; throws Error(resource_exhausted) without memory.
  static std::unique_ptr<Connection> connecting(const MysqlConfig& config);
  // Takes the login on once socket() is ready as poll_events() asked: true once logged
  // in. Throws Error as the constructor does when the login fails (the session is closed).
  bool connect_resume(int ready);
  // A statement sent without waiting: start() sends it (`sql` must outlive it), resume()
  // goes on once socket() is ready as poll_events() asked; each returns true once the
  // statement's replies are all in, and results() then returns them or throws as query()
  // does (`what` names the operation).
  bool start(std::string_view sql);
  bool resume(int ready);
  std::vector<ResultSet> results(std::string_view what);
  int socket() const;
  short poll_events() const;  // poll()'s events for what libmariadb waits for
  // libmariadb's readiness bits (MYSQL_WAIT_*) for poll()'s revents.
  static int ready_from(short revents);
  // When libmariadb asks to wait a while without the socket (a pause of its own): how
  // long, after which resume(MYSQL_WAIT_TIMEOUT).
  std::optional<std::chrono::milliseconds> library_pause() const;
  static constexpr int kTimedOut = 8;  // MYSQL_WAIT_TIMEOUT

  // For an idle session: true if the server has spoken or hung up since its last reply
  // (it closed the session for idleness, was restarted, or KILLed it). Such a session is
  // gone; it must not be handed a statement, which could never be retried safely.
  bool server_hung_up() const;

 private:
  // Waits for what libmariadb asked for in `status` (MYSQL_WAIT_*), or the stop wake-up;
  // returns the events that happened for the next *_cont call.
  int wait_io(int status, Clock::time_point deadline, int wake_fd);

  enum class Connect { later };
  Connection(const MysqlConfig& config, Connect);  // set up, not connected
  void connected(st_mysql* ret);
  [[noreturn]] void login_failed(const MysqlConfig& config);
  void logged_in();
  // Goes on from a start/cont call that returned `status`, through the statement's
  // result sets; true once they are all in.
  bool pump(int status);

  enum class Phase { query, store, next, done };

  st_mysql* mysql_ = nullptr;
  const MysqlConfig* config_ = nullptr;  // connecting(): the caller's, for a failed login
  int wants_ = 0;                        // MYSQL_WAIT_* of the step in progress
  Phase phase_ = Phase::done;
  int query_error_ = 0;
  st_mysql_res* result_ = nullptr;
  int more_ = 0;
  std::vector<ResultSet> sets_;
  bool failed_ = false;
  unsigned int failure_code_ = 0;
  std::string failure_;
  std::uint64_t id_ = 0;
  bool usable_ = true;
  std::chrono::seconds wait_timeout_{0};
  std::unique_ptr<Waker> waker_;  // made on the first cancellable statement
};

// A field that holds an unsigned number; Error(internal) naming `what` otherwise.
std::uint64_t to_u64(const Field& field, const char* what);

// X'…': any bytes as an SQL hex literal, so names need no escaping and no character
// set ever reinterprets them.
std::string hex_literal(std::string_view bytes);

// errors.cc: the one place that turns a libmariadb / server error number into an
// Error; `what` names the operation, the message is the server's.
[[noreturn]] void throw_mysql_error(unsigned int code, std::string_view message,
                                    std::string_view what);
// true for the client-side errors that mean the session is gone (server gone, lost
// connection, cannot connect).
bool is_connection_error(unsigned int code);

}  // namespace warden::engines::mysql
