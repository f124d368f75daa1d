#include "engines/postgres/pg_connection.h"

#include <poll.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <thread>
#include <utility>

#include "warden/error.h"

namespace warden::engines::postgres {
namespace {

using std::chrono::milliseconds;

// The first words of `sql` on one line, for a message.
std::string gist(const std::string& sql) {
  constexpr std::size_t kMost = 60;
  std::string out;
  bool space = false;
  for (const char c : sql) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
    if (out.size() >= kMost) return out + "...";
  }
  return out;
}

// Longest poll() slice, so a stop request is seen soon.
constexpr milliseconds kSlice{20};
constexpr unsigned kByteaOid = 17;

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// What a failed login says, as an Errc: libpq gives no SQLSTATE for it, only text.
Errc login_error(const std::string& message) {
  if (contains(message, "password authentication failed") ||
      contains(message, "no password supplied") || contains(message, "pg_hba.conf") ||
      (contains(message, "role \"") && contains(message, "does not exist")) ||
      contains(message, "not permitted to log in") || contains(message, "certificate")) {
    return Errc::permission_denied;
  }
  if (contains(message, "database \"") && contains(message, "does not exist")) {
    return Errc::invalid_argument;
  }
  if (contains(message, "too many clients") || contains(message, "remaining connection slots")) {
    return Errc::resource_exhausted;
  }
  return Errc::unavailable;
}

std::string trimmed(const char* text) {
  std::string out = text ? text : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// Of a statement's results, the one that answers it: the last, or the first error (a
// script's earlier statements). Frees the other.
void keep_result(PGresult*& kept, PGresult* result) {
  if (kept != nullptr && PQresultStatus(kept) == PGRES_FATAL_ERROR) {
    PQclear(result);
    return;
  }
  if (kept != nullptr) PQclear(kept);
  kept = result;
}

}  // namespace

bool Reply::ok() const {
  const auto status = PQresultStatus(result_.get());
  return status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK;
}

std::string Reply::sqlstate() const {
  if (ok()) return {};
  const char* state = PQresultErrorField(result_.get(), PG_DIAG_SQLSTATE);
  return state ? state : "";
}

std::string Reply::message() const {
  const char* primary = PQresultErrorField(result_.get(), PG_DIAG_MESSAGE_PRIMARY);
  return trimmed(primary ? primary : PQresultErrorMessage(result_.get()));
}

std::string Reply::text(int row, int column) const {
  return std::string(PQgetvalue(result_.get(), row, column),
                     static_cast<std::size_t>(PQgetlength(result_.get(), row, column)));
}

std::int64_t Reply::integer(int row, int column) const {
  const std::string value = text(row, column);
  std::int64_t out = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size()) {
    throw Error(Errc::internal, "PostgreSQL answered '" + value + "' where a number was expected");
  }
  return out;
}

namespace {

// libpq's keyword and value arrays for `config`, pointing into `pairs`.
struct ConnectParams {
  explicit ConnectParams(const PgConfig& config) : pairs(config.conninfo()) {
    for (const auto& [key, value] : pairs) {
      keys.push_back(key.c_str());
      values.push_back(value.c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<const char*> keys;
  std::vector<const char*> values;
};

}  // namespace

std::unique_ptr<PgConnection> PgConnection::open(const PgConfig& config) {
  const ConnectParams params(config);
  PGconn* conn = PQconnectdbParams(params.keys.data(), params.values.data(), 0);
  if (conn == nullptr)
    throw Error(Errc::resource_exhausted, "libpq could not allocate a connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string message = trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    throw Error(login_error(message), config.describe() + ": " + message);
  }
  // Non-blocking sends: a full socket buffer never blocks a cancellable wait.
  PQsetnonblocking(conn, 1);
  return std::unique_ptr<PgConnection>(new PgConnection(conn));
}

std::unique_ptr<PgConnection> PgConnection::start(const PgConfig& config) {
  const ConnectParams params(config);
  PGconn* conn = PQconnectStartParams(params.keys.data(), params.values.data(), 0);
  if (conn == nullptr)
    throw Error(Errc::resource_exhausted, "libpq could not allocate a connection");
  std::unique_ptr<PgConnection> out(new PgConnection(conn));
  out->describe_ = config.describe();
  out->wants_write_ = true;  // libpq's rule: the first step waits for the socket writable
  if (PQstatus(conn) == CONNECTION_BAD) out->login_failed();
  return out;
}

bool PgConnection::connect_step() {
  if (conn_ == nullptr) throw Error(Errc::unavailable, "PostgreSQL: the connection is closed");
  switch (PQconnectPoll(conn_)) {
    case PGRES_POLLING_OK:
      wants_write_ = false;
      pid_ = PQbackendPID(conn_);
      PQsetnonblocking(conn_, 1);
      return true;
    case PGRES_POLLING_WRITING:
      wants_write_ = true;
      return false;
    case PGRES_POLLING_READING:
      wants_write_ = false;
      return false;
    default:
      login_failed();
  }
}

void PgConnection::login_failed() {
  const std::string message = trimmed(PQerrorMessage(conn_));
  close();
  throw Error(login_error(message), describe_ + ": " + message);
}

PgConnection::PgConnection(PGconn* conn) : conn_(conn), pid_(PQbackendPID(conn)) {}

PgConnection::~PgConnection() { close(); }

void PgConnection::close() {
  if (pending_ != nullptr) PQclear(pending_);
  pending_ = nullptr;
  then_execute_.reset();
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
}

void PgConnection::send_cancel() {
  if (conn_ == nullptr || cancelling_->exchange(true)) return;  // one under way already
  PGcancel* cancel = PQgetCancel(conn_);
  if (cancel == nullptr) {
    *cancelling_ = false;
    return;
  }
  // Detached: it ends when the postmaster answers (at once, unless the server is
  // frozen; then when it thaws), whether or not this connection still exists.
  std::thread([cancel, done = cancelling_] {
    char ignored[256];
    PQcancel(cancel, ignored, sizeof ignored);  // a failure shows as the query running on
    PQfreeCancel(cancel);
    *done = false;
  }).detach();
}

bool PgConnection::alive() {
  if (!usable()) return false;
  pollfd fd{PQsocket(conn_), POLLIN, 0};
  if (::poll(&fd, 1, 0) > 0 &&
      (PQconsumeInput(conn_) == 0 || PQstatus(conn_) != CONNECTION_OK || PQisBusy(conn_))) {
    close();
    return false;
  }
  return usable();
}

void PgConnection::broken(const std::string& what) {
  const std::string message = conn_ ? trimmed(PQerrorMessage(conn_)) : "connection closed";
  close();
  throw Error(Errc::unavailable, "PostgreSQL: " + what + ": " + message);
}

Reply PgConnection::query(const std::string& sql, const std::vector<Param>& params,
                          const QueryLimits& limits) {
  send(sql, params);
  return finish(limits);
}

void PgConnection::send(const std::string& sql, const std::vector<Param>& params) {
  if (conn_ == nullptr) throw Error(Errc::unavailable, "PostgreSQL: the connection is closed");
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  std::vector<unsigned> types;
  for (const Param& p : params) {
    values.push_back(p.value.data());
    lengths.push_back(static_cast<int>(p.value.size()));
    formats.push_back(p.bytes ? 1 : 0);
    types.push_back(p.bytes ? kByteaOid : 0);
  }
  last_sent_ = gist(sql);
  if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(params.size()), types.data(),
                        values.data(), lengths.data(), formats.data(), 0) == 0) {
    broken("sending a query failed");
  }
}

bool PgConnection::flush_pending() {
  const int flushed = PQflush(conn_);
  if (flushed < 0) broken("sending a query failed");
  wants_write_ = flushed == 1;
  return wants_write_;
}

std::optional<Reply> PgConnection::reply_if_ready() {
  if (conn_ == nullptr) throw Error(Errc::unavailable, "PostgreSQL: the connection is closed");
  flush_pending();
  if (PQconsumeInput(conn_) == 0) broken("the connection broke");
  while (!PQisBusy(conn_)) {
    PGresult* result = PQgetResult(conn_);
    if (result == nullptr) {
      PGresult* last = std::exchange(pending_, nullptr);
      if (last == nullptr || PQstatus(conn_) != CONNECTION_OK) {
        if (last != nullptr) PQclear(last);
        broken("the server closed the connection");
      }
      Reply reply(last);
      if (then_execute_ && reply.ok()) {  // prepared: the statement itself goes now
        const Execute execute = std::move(*then_execute_);
        then_execute_.reset();
        prepared_.insert(execute.name);
        send_execute(execute.name, execute.params);
        flush_pending();
        continue;
      }
      then_execute_.reset();  // a prepare that failed is the answer
      return reply;
    }
    keep_result(pending_, result);
  }
  return std::nullopt;
}

Reply PgConnection::query_prepared(const std::string& name, const std::string& sql,
                                   const std::vector<Param>& params, const QueryLimits& limits) {
  if (conn_ == nullptr) throw Error(Errc::unavailable, "PostgreSQL: the connection is closed");
  if (!prepared_.contains(name)) {
    last_sent_ = "preparing " + name;
    if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) == 0) {
      broken("preparing a statement failed");
    }
    Reply prepared = finish(limits);
    if (!prepared.ok()) return prepared;
    prepared_.insert(name);
  }
  send_execute(name, params);
  return finish(limits);
}

void PgConnection::send_execute(const std::string& name, const std::vector<Param>& params) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const Param& p : params) {
    values.push_back(p.value.data());
    lengths.push_back(static_cast<int>(p.value.size()));
    formats.push_back(p.bytes ? 1 : 0);
  }
  last_sent_ = name;
  if (PQsendQueryPrepared(conn_, name.c_str(), static_cast<int>(params.size()), values.data(),
                          lengths.data(), formats.data(), 0) == 0) {
    broken("sending a query failed");
  }
}

void PgConnection::send_prepared(const std::string& name, const std::string& sql,
                                 const std::vector<Param>& params) {
  if (conn_ == nullptr) throw Error(Errc::unavailable, "PostgreSQL: the connection is closed");
  if (prepared_.contains(name)) {
    send_execute(name, params);
    return;
  }
  last_sent_ = "preparing " + name;
  if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) == 0) {
    broken("preparing a statement failed");
  }
  then_execute_.emplace(Execute{name, params});
}

Reply PgConnection::script(const std::string& sql, const QueryLimits& limits) {
  if (conn_ == nullptr) throw Error(Errc::unavailable, "PostgreSQL: the connection is closed");
  last_sent_ = gist(sql);
  if (PQsendQuery(conn_, sql.c_str()) == 0) broken("sending a statement failed");
  return finish(limits);
}

Reply PgConnection::finish(const QueryLimits& limits) {
  Clock::time_point last_cancel{};  // the epoch: long ago, without overflow
  Clock::time_point give_up_at = limits.give_up_at;
  // Flush what libpq could not send at once, then read until the last result.
  while (true) {
    const int flushed = PQflush(conn_);
    if (flushed < 0) broken("sending a query failed");
    const auto now = Clock::now();
    if (now >= give_up_at) {
      close();
      throw Error(Errc::deadline_exceeded,
                  "PostgreSQL did not answer in time (" + last_sent_ + ")");
    }
    if ((limits.stop.stop_requested() || now >= limits.cancel_at) &&
        now - last_cancel >= kCancelRepeat) {
      if (last_cancel == Clock::time_point{} && limits.after_cancel != Clock::duration::max()) {
        give_up_at = std::min(give_up_at, now + limits.after_cancel);
      }
      send_cancel();
      last_cancel = now;
    }
    if (flushed == 0 && !PQisBusy(conn_)) break;
    auto slice = kSlice;
    if (give_up_at != Clock::time_point::max()) {
      slice = std::clamp(std::chrono::duration_cast<milliseconds>(give_up_at - now),
                         milliseconds(1), kSlice);
    }
    pollfd fd{PQsocket(conn_), static_cast<short>(POLLIN | (flushed == 1 ? POLLOUT : 0)), 0};
    if (::poll(&fd, 1, static_cast<int>(slice.count())) < 0 && errno != EINTR) {
      broken("waiting for an answer failed");
    }
    if ((fd.revents & (POLLIN | POLLERR | POLLHUP)) != 0 && PQconsumeInput(conn_) == 0) {
      broken("the connection broke");
    }
  }
  PGresult* last = nullptr;
  while (PGresult* result = PQgetResult(conn_)) {
    keep_result(last, result);
    // The rest of the results are already read (PQisBusy was false) or arrive now.
    while (PQisBusy(conn_)) {
      pollfd fd{PQsocket(conn_), POLLIN, 0};
      if (::poll(&fd, 1, static_cast<int>(kSlice.count())) < 0 && errno != EINTR) {
        PQclear(last);
        broken("waiting for an answer failed");
      }
      if (PQconsumeInput(conn_) == 0) {
        PQclear(last);
        broken("the connection broke");
      }
      if (Clock::now() >= give_up_at) {
        PQclear(last);
        close();
        throw Error(Errc::deadline_exceeded,
                    "PostgreSQL did not answer in time (" + last_sent_ + ")");
      }
    }
  }
  if (last == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    if (last != nullptr) PQclear(last);
    broken("the server closed the connection");
  }
  return Reply(last);
}

void throw_reply(const Reply& reply, const std::string& what) {
  const std::string state = reply.sqlstate();
  Errc code = Errc::internal;
  if (state == "42501") {
    code = Errc::permission_denied;  // insufficient_privilege
  } else if (state.starts_with("08") || state.starts_with("57P") || state == "40001" ||
             state == "40P01" || state == "55P03" || state == "57014") {
    code = Errc::unavailable;  // connection, shutdown, serialization, timeouts: retry
  } else if (state.starts_with("53")) {
    code = Errc::resource_exhausted;  // insufficient_resources
  } else if (state.starts_with("28")) {
    code = Errc::permission_denied;  // invalid_authorization_specification
  } else if (state.starts_with("22")) {
    code = Errc::invalid_argument;  // data exception
  }
  throw Error(code, "PostgreSQL: " + what + ": " + reply.message() + " (SQLSTATE " + state + ")");
}

}  // namespace warden::engines::postgres
