#include "engines/mysql/connection.h"

#include <errmsg.h>
#include <mysql.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <mutex>

#include "warden/error.h"

namespace warden::engines::mysql {
namespace {

// libmariadb's global state is set up once, before any thread uses it.
void library_init() {
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

unsigned int whole_seconds(std::chrono::milliseconds d) {
  return static_cast<unsigned int>(std::max<long long>(1, (d.count() + 999) / 1000));
}

}  // namespace

Waker::Waker() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throw Error(Errc::resource_exhausted, "mysql: no eventfd for a cancellable wait");
}

Waker::~Waker() { ::close(fd_); }

void Waker::wake() const {
  const std::uint64_t one = 1;
  (void)!::write(fd_, &one, sizeof one);
}

void Waker::drain() const {
  std::uint64_t count = 0;
  (void)!::read(fd_, &count, sizeof count);
}

std::uint64_t to_u64(const Field& field, const char* what) {
  std::uint64_t value = 0;
  if (!field ||
      std::from_chars(field->data(), field->data() + field->size(), value).ec != std::errc()) {
    throw Error(Errc::internal, std::string("mysql: unexpected ") + what + " in the reply");
  }
  return value;
}

std::string hex_literal(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "X'";
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    out += kHex[u >> 4];
    out += kHex[u & 0xF];
  }
  out += '\'';
  return out;
}

Connection::Connection(const MysqlConfig& config) : Connection(config, Connect::later) {
  if (mysql_real_connect(mysql_, config.host.c_str(), config.user.c_str(), config.password.c_str(),
                         config.database.c_str(), config.port, nullptr,
                         CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS) == nullptr) {
    login_failed(config);
  }
  logged_in();
}

Connection::Connection(const MysqlConfig& config, Connect) {
  library_init();
  mysql_ = mysql_init(nullptr);
  if (mysql_ == nullptr) throw Error(Errc::resource_exhausted, "mysql: out of memory");
  const unsigned int timeout = whole_seconds(config.op_timeout);
  mysql_options(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  // Statements have deadlines of their own (query()); the connect is the one blocking
  // call, and these bound its handshake.
  mysql_options(mysql_, MYSQL_OPT_READ_TIMEOUT, &timeout);
  mysql_options(mysql_, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
  // A session that silently reconnected would have lost its locks: never.
  const my_bool no = 0;
  mysql_options(mysql_, MYSQL_OPT_RECONNECT, &no);
  mysql_options(mysql_, MYSQL_OPT_NONBLOCK, nullptr);
}

std::unique_ptr<Connection> Connection::connecting(const MysqlConfig& config) {
  std::unique_ptr<Connection> out(new Connection(config, Connect::later));
  out->config_ = &config;
  MYSQL* ret = nullptr;
  const int status = mysql_real_connect_start(
      &ret, out->mysql_, config.host.c_str(), config.user.c_str(), config.password.c_str(),
      config.database.c_str(), config.port, nullptr, CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS);
  out->wants_ = status;
  if (status == 0) out->connected(ret);
  return out;
}

bool Connection::connect_resume(int ready) {
  MYSQL* ret = nullptr;
  const int status = mysql_real_connect_cont(&ret, mysql_, ready);
  wants_ = status;
  if (status != 0) return false;
  connected(ret);
  return true;
}

void Connection::connected(st_mysql* ret) {
  if (ret == nullptr) login_failed(*config_);
  logged_in();
}

void Connection::login_failed(const MysqlConfig& config) {
  const unsigned int code = mysql_errno(mysql_);
  const std::string message = mysql_error(mysql_);
  mysql_close(mysql_);
  mysql_ = nullptr;
  usable_ = false;
  throw_mysql_error(code, message,
                    "connect to " + config.host + ':' + std::to_string(config.port) + " as '" +
                        config.user + "', database '" + config.database + "'");
}

void Connection::logged_in() {
  id_ = mysql_thread_id(mysql_);
  // A peer that vanished without a FIN (a dead host, a dropped NAT entry) is noticed by
  // the kernel within about 11 s, as on postgres://: a wait for ever on such a session
  // then fails instead of waiting for nothing.
  const int fd = mysql_get_socket(mysql_);
  const int on = 1;
  const int idle = 5;
  const int interval = 2;
  const int count = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

int Connection::socket() const { return mysql_ == nullptr ? -1 : mysql_get_socket(mysql_); }

short Connection::poll_events() const {
  short events = 0;
  if (wants_ & MYSQL_WAIT_READ) events |= POLLIN;
  if (wants_ & MYSQL_WAIT_WRITE) events |= POLLOUT;
  if (wants_ & MYSQL_WAIT_EXCEPT) events |= POLLPRI;
  return events;
}

int Connection::ready_from(short revents) {
  int ready = 0;
  if (revents & (POLLIN | POLLHUP | POLLERR)) ready |= MYSQL_WAIT_READ;
  if (revents & (POLLOUT | POLLHUP | POLLERR)) ready |= MYSQL_WAIT_WRITE;
  if (revents & POLLPRI) ready |= MYSQL_WAIT_EXCEPT;
  return ready;
}

std::optional<std::chrono::milliseconds> Connection::library_pause() const {
  const bool socket_wait = (wants_ & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE | MYSQL_WAIT_EXCEPT)) != 0;
  if (socket_wait || !(wants_ & MYSQL_WAIT_TIMEOUT) || mysql_ == nullptr) return std::nullopt;
  return std::chrono::milliseconds(mysql_get_timeout_value_ms(mysql_));
}

Connection::~Connection() { close(); }

void Connection::close() {
  usable_ = false;
  if (result_ != nullptr) mysql_free_result(result_);
  result_ = nullptr;
  if (mysql_ != nullptr) {
    mysql_close(mysql_);
    mysql_ = nullptr;
  }
}

bool Connection::server_hung_up() const {
  if (mysql_ == nullptr) return true;
  pollfd fd{};
  fd.fd = mysql_get_socket(mysql_);
  fd.events = POLLIN | POLLRDHUP;
  if (::poll(&fd, 1, 0) < 0) return true;
  return fd.revents != 0;
}

std::vector<ResultSet> Connection::query(std::string_view sql, Clock::time_point deadline,
                                         std::string_view what, std::stop_token stop,
                                         const std::function<void()>& on_stop,
                                         Clock::duration grace) {
  if (!usable_ || mysql_ == nullptr) {
    throw Error(Errc::unavailable, "mysql: " + std::string(what) + ": the session is closed");
  }
  bool stopped = false;
  std::optional<std::stop_callback<std::function<void()>>> on_request;
  if (stop.stop_possible() && on_stop) {
    // One eventfd per session, made on its first cancellable statement: a wake-up left
    // from an earlier statement is drained first (its callback ended with it).
    if (!waker_) waker_ = std::make_unique<Waker>();
    waker_->drain();
    on_request.emplace(stop, std::function<void()>([this] { waker_->wake(); }));
  }
  // Each step waits for what libmariadb asks for, handling the stop wake-up and the
  // deadline.
  for (bool done = start(sql); !done;) {
    const int wake_fd = (on_request && !stopped) ? waker_->fd() : -1;
    const int ready = wait_io(wants_, deadline, wake_fd);
    if (ready == -1) {
      // The stop was requested: have the server end the statement, then wait for its
      // reply a little longer.
      stopped = true;
      deadline = std::min(deadline, Clock::now() + grace);
      if (on_stop) on_stop();
      continue;
    }
    done = resume(ready);
  }
  return results(std::string(what) + (stopped ? " (cancelled)" : ""));
}

bool Connection::start(std::string_view sql) {
  if (!usable_ || mysql_ == nullptr) {
    failed_ = true;
    failure_code_ = CR_SERVER_LOST;
    failure_ = "the session is closed";
    return true;
  }
  sets_.clear();
  failed_ = false;
  phase_ = Phase::query;
  query_error_ = 0;
  return pump(mysql_real_query_start(&query_error_, mysql_, sql.data(), sql.size()));
}

bool Connection::resume(int ready) {
  switch (phase_) {
    case Phase::query:
      return pump(mysql_real_query_cont(&query_error_, mysql_, ready));
    case Phase::store:
      return pump(mysql_store_result_cont(&result_, mysql_, ready));
    case Phase::next:
      return pump(mysql_next_result_cont(&more_, mysql_, ready));
    case Phase::done:
      return true;
  }
  return true;
}

bool Connection::pump(int status) {
  // A statement that fails on the server leaves the session usable; a lost connection
  // closes it (results() throws then).
  const auto fail = [&] {
    failed_ = true;
    failure_code_ = mysql_errno(mysql_);
    failure_ = mysql_error(mysql_);
    if (is_connection_error(failure_code_)) close();
    phase_ = Phase::done;
    return true;
  };
  wants_ = 0;
  while (true) {
    if (status != 0) {
      wants_ = status;
      return false;
    }
    switch (phase_) {
      case Phase::query:
        if (query_error_ != 0) return fail();
        phase_ = Phase::store;
        result_ = nullptr;
        status = mysql_store_result_start(&result_, mysql_);
        break;
      case Phase::store:
        if (result_ != nullptr) {
          ResultSet set;
          const unsigned int fields = mysql_num_fields(result_);
          while (MYSQL_ROW row = mysql_fetch_row(result_)) {
            const unsigned long* lengths = mysql_fetch_lengths(result_);
            Row out;
            out.reserve(fields);
            for (unsigned int i = 0; i < fields; ++i) {
              out.push_back(row[i] == nullptr ? Field{} : Field{std::string(row[i], lengths[i])});
            }
            set.push_back(std::move(out));
          }
          mysql_free_result(result_);
          result_ = nullptr;
          sets_.push_back(std::move(set));
        } else if (mysql_field_count(mysql_) != 0) {
          return fail();
        }
        if (!mysql_more_results(mysql_)) {
          phase_ = Phase::done;
          return true;
        }
        phase_ = Phase::next;
        more_ = 0;
        status = mysql_next_result_start(&more_, mysql_);
        break;
      case Phase::next:
        if (more_ > 0) return fail();
        if (more_ < 0) {
          phase_ = Phase::done;
          return true;
        }
        phase_ = Phase::store;
        result_ = nullptr;
        status = mysql_store_result_start(&result_, mysql_);
        break;
      case Phase::done:
        return true;
    }
  }
}

std::vector<ResultSet> Connection::results(std::string_view what) {
  if (failed_) throw_mysql_error(failure_code_, failure_, what);
  return std::move(sets_);
}

int Connection::wait_io(int status, Clock::time_point deadline, int wake_fd) {
  pollfd fds[2] = {};
  fds[0].fd = mysql_get_socket(mysql_);
  if (status & MYSQL_WAIT_READ) fds[0].events |= POLLIN;
  if (status & MYSQL_WAIT_WRITE) fds[0].events |= POLLOUT;
  if (status & MYSQL_WAIT_EXCEPT) fds[0].events |= POLLPRI;
  fds[1].fd = wake_fd;
  fds[1].events = POLLIN;
  const nfds_t count = wake_fd >= 0 ? 2 : 1;
  // The library asks for a timeout with every read and write (MYSQL_OPT_READ_TIMEOUT,
  // op_timeout, needed by the blocking connect) and fails the read when it is reported:
  // a GET_LOCK that waits longer than op_timeout would be lost. A statement's deadline
  // is the caller's, so the library's is honoured only when it asks for nothing but the
  // timeout (a pause of its own).
  const bool socket_wait = (status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE | MYSQL_WAIT_EXCEPT)) != 0;
  while (true) {
    long long wait_ms = -1;
    bool library_timeout = false;
    if (deadline != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      wait_ms = std::max<long long>(0, left.count());
    }
    if ((status & MYSQL_WAIT_TIMEOUT) && !socket_wait) {
      const long long own = mysql_get_timeout_value_ms(mysql_);
      if (wait_ms < 0 || own <= wait_ms) {
        wait_ms = own;
        library_timeout = true;
      }
    }
    const int n = ::poll(fds, count, static_cast<int>(std::min<long long>(wait_ms, 1 << 30)));
    if (n < 0) {
      if (errno == EINTR) continue;
      close();
      throw Error(Errc::unavailable, "mysql: poll failed");
    }
    if (count == 2 && (fds[1].revents & POLLIN)) return -1;
    if (n == 0) {
      if (library_timeout) return MYSQL_WAIT_TIMEOUT;
      close();
      throw Error(Errc::deadline_exceeded, "mysql: no reply from the server in time");
    }
    return ready_from(fds[0].revents);
  }
}

}  // namespace warden::engines::mysql
