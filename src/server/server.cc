#include "server/server.h"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>

#include "server/auth_worker.h"
#include "server/durable_state.h"
#include "server/metrics_endpoint.h"
#include "server/resp.h"
#include "warden/error.h"
#include "warden/version.h"

namespace warden::server {
namespace {

using asio::ip::tcp;

constexpr std::size_t kReadChunk = 16 * 1024;
constexpr auto kAcceptReportEvery = std::chrono::seconds(10);

// Lets one process hold as many connections as the hard limit allows (10,000 idle
// clients need more than the usual soft limit of 1,024 descriptors).
void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

std::pair<std::string, std::uint16_t> split_host_port(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) {
    throw Error(Errc::invalid_argument, "expected host:port, got '" + text + "'");
  }
  const std::string port = text.substr(colon + 1);
  unsigned long value = 0;
  try {
    value = std::stoul(port);
  } catch (...) {
    value = 70000;
  }
  if (value > 65535) throw Error(Errc::invalid_argument, "bad port in '" + text + "'");
  return {text.substr(0, colon), static_cast<std::uint16_t>(value)};
}

}  // namespace

struct Server::Impl {
  struct Connection : std::enable_shared_from_this<Connection> {
    Connection(Impl& s, tcp::socket sock, ConnId i) : server(s), socket(std::move(sock)), id(i) {}
    Impl& server;
    tcp::socket socket;
    ConnId id;
    std::string in;       // bytes read, not yet parsed
    std::string out;      // replies not yet handed to the socket
    std::string writing;  // the buffer of the write in flight
    bool reading = false;
    bool parked = false;
    bool closing = false;  // close once `out` is written
    bool closed = false;
  };

  Impl(ServerOptions o)
      : options(std::move(o)),
        state(options.data_dir, options.reset_state),
        dispatcher(
            DispatcherConfig{options.limits, options.password, WARDEN_VERSION_STRING, Clock::now()},
            &state.tokens(), &state),
        acceptor(io),
        accept_timer(io),
        timer(io),
        signals(io) {
    raise_fd_limit();
    tcp::endpoint endpoint(asio::ip::make_address(options.host), options.port);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(asio::socket_base::max_listen_connections);
    bound_port = acceptor.local_endpoint().port();
    start_users();
    if (!options.metrics_listen.empty()) {
      auto [host, port] = split_host_port(options.metrics_listen);
      metrics = std::make_unique<MetricsEndpoint>(host, port, [this] { return snapshot(); });
    }
  }

  // The Prometheus text, rendered on the loop thread (which owns every number in it).
  std::string snapshot() {
    std::promise<std::string> promise;
    auto future = promise.get_future();
    asio::post(io, [this, &promise] { promise.set_value(render_metrics(dispatcher.stats())); });
    if (future.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      return "# wardend is not answering\n";
    }
    return future.get();
  }

  void start_accept() {
    acceptor.async_accept([this](std::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
        if (out_of_descriptors(ec)) return accept_later(ec);
        start_accept();  // e.g. the client reset before we accepted: try the next one
        return;
      }
      accept_backoff = std::chrono::milliseconds(0);
      socket.set_option(tcp::no_delay(true));
      socket.non_blocking(true);  // read() reads only after a readiness wait
      const ConnId id = ++next_id;
      auto conn = std::make_shared<Connection>(*this, std::move(socket), id);
      if (!dispatcher.connect(id)) {
        resp::error(conn->out, "LIMIT", "too many connections");
        conn->closing = true;
        flush(conn);
      } else {
        connections[id] = conn;
        read(conn);
      }
      start_accept();
    });
  }

  // EMFILE, ENFILE, ENOBUFS, ENOMEM: no descriptor or memory for a new connection. The
  // pending connection stays in the backlog, so accepting again at once would fail again
  // at once, forever, at full CPU. Instead: pause accepting (10 ms, doubling up to 1 s),
  // keep serving every connection we have (closing one frees a descriptor), and say so
  // on stderr at most once per kAcceptReportEvery.
  static bool out_of_descriptors(std::error_code ec) {
    // By value within asio's own category: comparing against std::errc conditions goes
    // through the category's virtual equivalent(), which asio's header-only category
    // does not survive under UBSan's vptr check.
    if (ec.category() != asio::system_category()) return false;
    const int v = ec.value();
    return v == EMFILE || v == ENFILE || v == ENOBUFS || v == ENOMEM;
  }

  void accept_later(std::error_code ec) {
    using std::chrono::milliseconds;
    accept_backoff = std::clamp(accept_backoff * 2, milliseconds(10), milliseconds(1000));
    ++accept_failures;
    const auto now = Clock::now();
    if (now >= next_accept_report) {
      std::fprintf(stderr,
                   "wardend: cannot accept connections: %s (%llu time(s) since the last "
                   "report); serving the %zu open ones and retrying every %lld ms at most\n",
                   ec.message().c_str(), static_cast<unsigned long long>(accept_failures),
                   connections.size(), static_cast<long long>(accept_backoff.count()));
      accept_failures = 0;
      next_accept_report = now + kAcceptReportEvery;
    }
    accept_timer.expires_after(accept_backoff);
    accept_timer.async_wait([this](std::error_code wait_ec) {
      if (!wait_ec && acceptor.is_open()) start_accept();
    });
  }

  void read(const std::shared_ptr<Connection>& c) {
    if (c->reading || c->closing || c->closed) return;
    // A parked connection is still read, so that its close or half-close is seen at once
    // (the waiter leaves the queue); what it pipelines meanwhile waits in `in`, bounded.
    if (c->parked && c->in.size() > options.max_request_bytes) return;
    if (c->out.size() + c->writing.size() > options.max_output_bytes) return;  // back-pressure
    c->reading = true;
    // Wait for readability, then read into the loop's one buffer: an idle connection
    // holds no read buffer of its own (10,000 idle clients would otherwise pin 160 MiB).
    c->socket.async_wait(tcp::socket::wait_read, [this, c](std::error_code wait_ec) {
      c->reading = false;
      if (c->closed) return;
      std::error_code ec = wait_ec;
      std::size_t n = 0;
      if (!ec) n = c->socket.read_some(asio::buffer(read_buffer), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) {
        read(c);  // the readiness was spurious
        return;
      }
      if (ec == asio::error::eof) {
        // A half-close ends the conversation gracefully: a parked wait is cancelled
        // (or its grant, if it won the race, is still written), then we close.
        process(c);
        dispatcher.cancel_parked(c->id, Clock::now());
        c->closing = true;
        deliver_wakeups();  // a closing connection is not read again
        flush(c);
        reschedule();
        return;
      }
      if (ec) {
        close(c);
        return;
      }
      c->in.append(read_buffer.data(), n);
      process(c);
      reschedule();
    });
  }

  // Executes every complete request buffered on `c`, up to a parked one.
  void process(const std::shared_ptr<Connection>& c) {
    const resp::Limits limits{options.max_request_bytes};
    std::size_t offset = 0;
    while (!c->parked && !c->closing && !c->closed) {
      const std::string_view rest = std::string_view(c->in).substr(offset);
      if (rest.empty()) break;
      const auto parsed = resp::parse_request(rest, limits);
      if (parsed.status == resp::Status::incomplete) break;
      if (parsed.status == resp::Status::error) {
        resp::error(c->out, "ERR", parsed.error);
        c->closing = true;
        break;
      }
      offset += parsed.consumed;
      if (parsed.args.empty()) continue;
      const auto outcome = dispatcher.execute(c->id, parsed.args, Clock::now(), c->out);
      if (outcome == Dispatcher::Outcome::parked) c->parked = true;
      if (outcome == Dispatcher::Outcome::close) c->closing = true;
    }
    c->in.erase(0, offset);
    deliver_wakeups();
    flush(c);
    read(c);
  }

  // --users: the table, and the threads that check passwords off the loop (two at most,
  // so an AUTH flood costs at most two hashes' memory; see auth_worker.h).
  void start_users() {
    if (options.users_file.empty()) return;
    dispatcher.set_users(read_users_file(options.users_file));
    auth_worker = std::make_unique<AuthWorker>(2, [this](std::uint64_t id, bool matched) {
      asio::post(io, [this, id, matched] {
        dispatcher.auth_checked(id, matched);
        deliver_wakeups();
      });
    });
  }

  // On the loop (SIGHUP): a good file replaces the table, a bad one keeps it.
  void reload_users() {
    if (options.users_file.empty()) return;
    try {
      auto users = read_users_file(options.users_file);
      const std::size_t n = users->size();
      dispatcher.set_users(std::move(users));
      std::fprintf(stderr, "wardend: reloaded %zu user(s) from %s\n", n,
                   options.users_file.c_str());
    } catch (const Error& e) {
      std::fprintf(stderr, "wardend: kept the users in use; the new file is refused: %s\n",
                   e.what());
    }
  }

  // SIGHUP reloads the users file and waits again; SIGINT and SIGTERM stop the server.
  void wait_for_signal() {
    signals.async_wait([this](std::error_code ec, int sig) {
      if (ec) return;
      if (sig != SIGHUP) return shutdown();
      reload_users();
      wait_for_signal();
    });
  }

  // Hands replies of resolved parked requests to their connections and resumes them.
  void deliver_wakeups() {
    if (auth_worker) {
      for (auto& check : dispatcher.take_auth_checks()) {
        auth_worker->submit(check.id, std::move(check.hash), std::move(check.password));
      }
    }
    auto wakeups = dispatcher.take_wakeups();
    for (auto& w : wakeups) {
      auto it = connections.find(w.conn);
      if (it == connections.end()) continue;
      auto c = it->second;
      c->out += w.reply;
      c->parked = false;
      // Requests pipelined behind the parked one run now; process() flushes and reads.
      asio::post(io, [this, c] {
        process(c);
        reschedule();
      });
    }
  }

  void flush(const std::shared_ptr<Connection>& c) {
    if (c->closed || !c->writing.empty()) return;
    if (c->out.empty()) {
      if (c->closing) close(c);
      return;
    }
    c->writing.swap(c->out);
    asio::async_write(c->socket, asio::buffer(c->writing),
                      [this, c](std::error_code ec, std::size_t) {
                        c->writing.clear();
                        if (ec) {
                          close(c);
                          return;
                        }
                        flush(c);
                        read(c);  // may have paused for back-pressure
                      });
  }

  void close(const std::shared_ptr<Connection>& c) {
    if (c->closed) return;
    c->closed = true;
    std::error_code ignored;
    c->socket.shutdown(tcp::socket::shutdown_both, ignored);
    c->socket.close(ignored);
    if (connections.erase(c->id) > 0) {
      dispatcher.disconnect(c->id, Clock::now());
      deliver_wakeups();
    }
  }

  // Arms the timer for the table's next wake-up if that is earlier than the one armed.
  // A timer that fires with nothing due only advances the table and re-arms, so it is
  // never cancelled: cancelling when the table empties and re-arming on the next
  // acquire would cost two timerfd syscalls per lock cycle.
  void reschedule() {
    const auto next = dispatcher.next_wakeup();
    if (!next || (armed && *armed <= *next)) return;
    armed = *next;
    timer.expires_at(*next);
    timer.async_wait([this](std::error_code ec) {
      if (ec == asio::error::operation_aborted) return;
      armed.reset();
      dispatcher.advance(Clock::now());
      deliver_wakeups();
      reschedule();
    });
  }

  void shutdown() {
    std::error_code ignored;
    acceptor.close(ignored);
    accept_timer.cancel();
    timer.cancel();
    signals.cancel(ignored);
    auto all = connections;
    for (auto& [id, c] : all) close(c);
    io.stop();
  }

  ServerOptions options;
  DurableState state;
  Dispatcher dispatcher;
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::steady_timer accept_timer;  // re-arms accepting after running out of descriptors
  std::chrono::milliseconds accept_backoff{0};
  std::uint64_t accept_failures = 0;  // since the last report on stderr
  Clock::time_point next_accept_report;
  asio::steady_timer timer;
  std::optional<Clock::time_point> armed;
  asio::signal_set signals;
  std::unordered_map<ConnId, std::shared_ptr<Connection>> connections;
  std::array<char, kReadChunk> read_buffer{};  // shared: the loop reads one socket at a time
  ConnId next_id = 0;
  std::uint16_t bound_port = 0;
  std::unique_ptr<MetricsEndpoint> metrics;
  std::unique_ptr<AuthWorker> auth_worker;  // last: joined before the loop goes away
};

Server::Server(ServerOptions options) {
  try {
    impl_ = std::make_unique<Impl>(std::move(options));
  } catch (const std::system_error& e) {
    throw Error(Errc::unavailable, std::string("cannot listen: ") + e.what());
  }
}

Server::~Server() = default;

void Server::run(bool handle_signals) {
  Impl& s = *impl_;
  if (handle_signals) {
    s.signals.add(SIGINT);
    s.signals.add(SIGTERM);
    if (!s.options.users_file.empty()) s.signals.add(SIGHUP);
    s.wait_for_signal();
  }
  s.start_accept();
  s.io.run();
}

void Server::stop() {
  asio::post(impl_->io, [s = impl_.get()] { s->shutdown(); });
}

void Server::reload_users() {
  asio::post(impl_->io, [s = impl_.get()] { s->reload_users(); });
}

std::uint16_t Server::port() const { return impl_->bound_port; }

std::uint16_t Server::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }

}  // namespace warden::server
