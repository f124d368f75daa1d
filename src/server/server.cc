#include "server/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/uri.h"
#include "server/auth_worker.h"
#include "server/durable_state.h"
#include "server/metrics_endpoint.h"
#include "server/resp.h"
#include "server/server_impl.h"
#include "server/tls_context.h"
#include "warden/error.h"
#include "warden/version.h"

namespace warden::server {
namespace {

using asio::ip::tcp;

constexpr auto kAcceptReportEvery = std::chrono::seconds(10);
constexpr auto kHandshakeReportEvery = std::chrono::seconds(10);
constexpr auto kPushOverflowReportEvery = std::chrono::seconds(10);
// How often connections are looked at for the AUTH deadline and the idle timeout: the
// deadlines are kept to within this.
constexpr auto kSweepEvery = std::chrono::milliseconds(500);
// TCP keep-alive after the first probe: one every 10 s, the peer gone after 3 unanswered.
constexpr int kKeepAliveInterval = 10;
constexpr int kKeepAliveProbes = 3;

// Turns on TCP keep-alive on `socket`, first probe after `idle` of silence. A failure
// leaves the connection as it was: keep-alive is a safety net, not a requirement.
void enable_keepalive(asio::ip::tcp::socket& socket, std::chrono::seconds idle) {
  std::error_code ignored;
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  const int fd = socket.native_handle();
  const int first = static_cast<int>(idle.count());
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &first, sizeof first);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepAliveInterval, sizeof kKeepAliveInterval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepAliveProbes, sizeof kKeepAliveProbes);
}

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

Server::Impl::Impl(ServerOptions o)
    : options(std::move(o)),
      plain(io, false),
      secure(io, true),
      timer(io),
      signals(io),
      sweep_timer(io),
      role_timer(io) {
  raise_fd_limit();
  if (options.cell.empty()) {
    state.emplace(options.data_dir, options.reset_state);
    dispatcher = make_dispatcher(&state->tokens(), &*state);
    restore_table();
  } else {
    start_cell();
  }
  start_users();
  // Certificates first: a bad file is the operator's to fix before anything listens.
  if (options.tls) tls_context.emplace(make_server_tls_context(*options.tls));
  if (options.listen_plain) bound_port = listen(plain, options.host, options.port);
  if (options.tls) bound_tls_port = listen(secure, options.tls->host, options.tls->port);
  if (!options.metrics_listen.empty()) {
    auto [host, port] = split_host_port(options.metrics_listen);
    metrics = std::make_unique<MetricsEndpoint>(host, port, [this] { return snapshot(); });
  }
}

std::unique_ptr<Dispatcher> Server::Impl::make_dispatcher(table::TokenSource* tokens,
                                                          GrantGuard* guard,
                                                          std::function<std::string()> extra_info) {
  DispatcherConfig config{options.limits, options.password, WARDEN_VERSION_STRING, started};
  config.extra_info = std::move(extra_info);
  auto made = std::make_unique<Dispatcher>(std::move(config), tokens, guard);
  if (users) made->set_users(users);
  return made;
}

std::uint16_t Server::Impl::listen(Listener& l, const std::string& host, std::uint16_t port) {
  try {
    tcp::endpoint endpoint(asio::ip::make_address(host), port);
    l.acceptor.open(endpoint.protocol());
    l.acceptor.set_option(tcp::acceptor::reuse_address(true));
    l.acceptor.bind(endpoint);
    l.acceptor.listen(asio::socket_base::max_listen_connections);
    return l.acceptor.local_endpoint().port();
  } catch (const std::system_error& e) {
    throw Error(Errc::unavailable, "cannot listen on " + host + ":" + std::to_string(port) +
                                       (l.tls ? " (TLS)" : "") + ": " + e.what());
  }
}

void Server::Impl::restore_table() {
  const auto now = Clock::now();
  if (auto table = state->take_restored()) {
    const std::size_t grants = dispatcher->restore(*table, now);
    std::printf("wardend: clean restart: restored %zu grant(s) and %zu lock-delay(s)\n", grants,
                table->delays.size());
  } else if (!state->snapshot_defect().empty()) {
    std::fprintf(stderr, "wardend: %s; not a clean restart: no grants for %llu ms\n",
                 state->snapshot_defect().c_str(),
                 static_cast<unsigned long long>(state->embargo_ms(now)));
  }
}

void Server::Impl::save_table() {
  try {
    const auto table = dispatcher->snapshot(Clock::now());
    state->save_table(table);
    std::printf("wardend: saved %zu grant(s) and %zu lock-delay(s) for the next start\n",
                table.holders.size(), table.delays.size());
  } catch (const Error& e) {
    std::fprintf(stderr, "wardend: %s; the next start waits out the restart embargo\n", e.what());
  }
}

std::string Server::Impl::snapshot() {
  std::promise<std::string> promise;
  auto future = promise.get_future();
  asio::post(io, [this, &promise] { promise.set_value(render_metrics(dispatcher->stats())); });
  if (future.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    return "# wardend is not answering\n";
  }
  return future.get();
}

void Server::Impl::start_accept(Listener& l) {
  l.acceptor.async_accept([this, &l](std::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !l.acceptor.is_open()) return;
      if (out_of_descriptors(ec)) return accept_later(l, ec);
      start_accept(l);  // e.g. the client reset before we accepted: try the next one
      return;
    }
    l.backoff = std::chrono::milliseconds(0);
    socket.set_option(tcp::no_delay(true));
    if (options.tcp_keepalive.count() > 0) enable_keepalive(socket, options.tcp_keepalive);
    socket.non_blocking(true);  // read() reads only after a readiness wait
    const ConnId id = ++next_id;
    auto conn = std::make_shared<Connection>(*this, std::move(socket), id);
    if (cell) conn->released = 0;  // a cell's leader writes what the cell holds
    if (l.tls) conn->tls = std::make_unique<Tls>(conn->socket, *tls_context, io);
    // A connection counts against the limit from accept on, a TLS one while it
    // handshakes too; over the limit, a TLS client still gets its -LIMIT over TLS.
    if (!dispatcher->connect(id)) {
      resp::error(conn->out, "LIMIT", "too many connections");
      conn->closing = true;
    } else {
      connections[id] = conn;
    }
    if (conn->tls) {
      handshake(conn);
    } else if (conn->closing) {
      flush(conn);
    } else {
      read(conn);
    }
    start_accept(l);
  });
}

void Server::Impl::handshake(const std::shared_ptr<Connection>& c) {
  c->handshaking = true;
  const auto timeout = options.tls->handshake_timeout;
  c->tls->handshake_timer.expires_after(timeout);
  c->tls->handshake_timer.async_wait([this, c, timeout](std::error_code ec) {
    if (ec || !c->handshaking || c->closed) return;
    report_handshake_failure(c, "no handshake within " + std::to_string(timeout.count()) + " ms");
    close(c);
  });
  c->tls->stream.async_handshake(asio::ssl::stream_base::server, [this, c](std::error_code ec) {
    c->handshaking = false;
    c->tls->handshake_timer.cancel();
    if (c->closed) return;  // timed out, or shut down
    if (ec) {
      report_handshake_failure(c, describe_handshake_error(ec, c->tls->stream.native_handle()));
      close(c);
      return;
    }
    flush(c);
    read(c);
  });
}

void Server::Impl::report_handshake_failure(const std::shared_ptr<Connection>& c,
                                            const std::string& why) {
  ++handshake_failures;
  const auto now = Clock::now();
  if (now < next_handshake_report) return;
  std::error_code ec;
  const auto peer = c->socket.remote_endpoint(ec);
  const std::string who =
      ec ? std::string("a client") : peer.address().to_string() + ":" + std::to_string(peer.port());
  const std::string others = handshake_failures > 1
                                 ? " (and " + std::to_string(handshake_failures - 1) +
                                       " other failure(s) since the last report)"
                                 : std::string();
  std::fprintf(stderr, "wardend: TLS handshake with %s failed: %s%s; connection closed\n",
               who.c_str(), why.c_str(), others.c_str());
  handshake_failures = 0;
  next_handshake_report = now + kHandshakeReportEvery;
}

bool Server::Impl::out_of_descriptors(std::error_code ec) {
  // By value within asio's own category: comparing against std::errc conditions goes
  // through the category's virtual equivalent(), which asio's header-only category
  // does not survive under UBSan's vptr check.
  if (ec.category() != asio::system_category()) return false;
  const int v = ec.value();
  return v == EMFILE || v == ENFILE || v == ENOBUFS || v == ENOMEM;
}

void Server::Impl::accept_later(Listener& l, std::error_code ec) {
  using std::chrono::milliseconds;
  l.backoff = std::clamp(l.backoff * 2, milliseconds(10), milliseconds(1000));
  ++accept_failures;
  const auto now = Clock::now();
  if (now >= next_accept_report) {
    std::fprintf(stderr,
                 "wardend: cannot accept connections: %s (%llu time(s) since the last "
                 "report); serving the %zu open ones and retrying every %lld ms at most\n",
                 ec.message().c_str(), static_cast<unsigned long long>(accept_failures),
                 connections.size(), static_cast<long long>(l.backoff.count()));
    accept_failures = 0;
    next_accept_report = now + kAcceptReportEvery;
  }
  l.retry_timer.expires_after(l.backoff);
  l.retry_timer.async_wait([this, &l](std::error_code wait_ec) {
    if (!wait_ec && l.acceptor.is_open()) start_accept(l);
  });
}

void Server::Impl::read(const std::shared_ptr<Connection>& c) {
  if (c->reading || c->closing || c->closed || c->handshaking) return;
  // A parked connection is still read, so that its close or half-close is seen at once
  // (the waiter leaves the queue); what it pipelines meanwhile waits in `in`, bounded.
  if (c->parked && c->in.size() > options.max_request_bytes) return;
  if (c->out.size() + c->writing.size() > options.max_output_bytes) return;  // back-pressure
  c->reading = true;
  if (c->tls) {
    c->tls->stream.async_read_some(asio::buffer(c->tls->buffer),
                                   [this, c](std::error_code ec, std::size_t n) {
                                     c->reading = false;
                                     if (c->closed) return;
                                     // A peer that closes TCP without close_notify
                                     // has half-closed as far as we are concerned.
                                     if (ec == asio::ssl::error::stream_truncated) {
                                       ec = asio::error::eof;
                                     }
                                     received(c, ec, c->tls->buffer.data(), n);
                                   });
    return;
  }
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
    received(c, ec, read_buffer.data(), n);
  });
}

void Server::Impl::received(const std::shared_ptr<Connection>& c, std::error_code ec,
                            const char* data, std::size_t n) {
  if (ec == asio::error::eof) {
    // A half-close ends the conversation gracefully: a parked wait is cancelled
    // (or its grant, if it won the race, is still written), then we close.
    process(c);
    dispatcher->cancel_parked(c->id, Clock::now());
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
  c->last_heard = Clock::now();
  if (c->fresh) {
    c->fresh = false;
    // A TLS client on the plain port waits for a ServerHello that never comes, and
    // its hello need not hold the LF an inline request ends with: say so, close.
    if (!c->tls && looks_like_tls_hello(std::string_view(data, n))) {
      resp::error(c->out, "ERR", "Protocol error: TLS handshake on a plain-text port");
      c->closing = true;
      flush(c);
      return;
    }
  }
  c->in.append(data, n);
  process(c);
  reschedule();
}

void Server::Impl::process(const std::shared_ptr<Connection>& c) {
  if (cell && !serving) return redirect(c);
  take_requests(c, [&](std::span<const std::string_view> args) {
    if (cell && cell_command(c, args)) return;
    const auto outcome = dispatcher->execute(c->id, args, Clock::now(), c->out);
    if (outcome == Dispatcher::Outcome::parked) c->parked = true;
    if (outcome == Dispatcher::Outcome::close) c->closing = true;
  });
  deliver_wakeups();
  flush(c);
  read(c);
}

void Server::Impl::start_users() {
  if (options.users_file.empty()) return;
  users = read_users_file(options.users_file);
  dispatcher->set_users(users);
  auth_worker = std::make_unique<AuthWorker>(2, [this](std::uint64_t id, bool matched) {
    asio::post(io, [this, id, matched] {
      dispatcher->auth_checked(id, matched);
      deliver_wakeups();
    });
  });
}

void Server::Impl::reload_users() {
  if (options.users_file.empty()) return;
  try {
    users = read_users_file(options.users_file);
    const std::size_t n = users->size();
    dispatcher->set_users(users);
    std::fprintf(stderr, "wardend: reloaded %zu user(s) from %s\n", n, options.users_file.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "wardend: kept the users in use; the new file is refused: %s\n", e.what());
  }
}

void Server::Impl::wait_for_signal() {
  signals.async_wait([this](std::error_code ec, int sig) {
    if (ec) return;
    if (sig != SIGHUP) return shutdown();
    reload_users();
    wait_for_signal();
  });
}

void Server::Impl::deliver_wakeups() {
  post_seal();
  if (auth_worker) {
    for (auto& check : dispatcher->take_auth_checks()) {
      auth_worker->submit(check.id, std::move(check.hash), std::move(check.password));
    }
  }
  auto wakeups = dispatcher->take_wakeups();
  for (auto& w : wakeups) {
    auto it = connections.find(w.conn);
    if (it == connections.end()) continue;
    auto c = it->second;
    // A wake-up of a connection not waiting for one is a push (REVOKE, CHANGED) the
    // client did not ask for: bounded like a reply, it closes the connection instead.
    const bool push = !c->parked;
    c->out += w.reply;
    if (push && c->out.size() + c->writing.size() > options.max_output_bytes) {
      report_push_overflow(c);
      close(c);
      continue;
    }
    c->parked = false;
    // Requests pipelined behind the parked one run now; process() flushes and reads.
    asio::post(io, [this, c] {
      process(c);
      reschedule();
    });
  }
}

void Server::Impl::report_push_overflow(const std::shared_ptr<Connection>& c) {
  ++push_overflows;
  const auto now = Clock::now();
  if (now < next_push_overflow_report) return;
  std::fprintf(stderr,
               "wardend: closed connection %llu: more than %zu bytes of pushes pending (it "
               "does not read); %llu such connection(s) since the last report\n",
               static_cast<unsigned long long>(c->id), options.max_output_bytes,
               static_cast<unsigned long long>(push_overflows));
  push_overflows = 0;
  next_push_overflow_report = now + kPushOverflowReportEvery;
}

void Server::Impl::sweep() {
  if (!auth_required() && options.idle_timeout.count() == 0) return;
  sweep_timer.expires_after(kSweepEvery);
  sweep_timer.async_wait([this](std::error_code ec) {
    if (ec) return;
    const auto now = Clock::now();
    std::vector<std::shared_ptr<Connection>> late;
    std::vector<std::shared_ptr<Connection>> idle;
    for (const auto& [id, c] : connections) {
      if (c->closing || c->closed || c->handshaking) continue;
      if (auth_required() && now - c->accepted_at >= options.auth_timeout &&
          !dispatcher->authenticated(id)) {
        late.push_back(c);
      } else if (options.idle_timeout.count() > 0 && !c->parked &&
                 now - c->last_heard >= options.idle_timeout) {
        idle.push_back(c);
      }
    }
    for (const auto& c : late) {
      resp::error(
          c->out, "NOAUTH",
          "no AUTH within " + std::to_string(options.auth_timeout.count()) + " ms; closing");
      c->closing = true;
      flush(c);
    }
    for (const auto& c : idle) close(c);
    sweep();
  });
}

void Server::Impl::flush(const std::shared_ptr<Connection>& c) {
  if (c->closed || c->handshaking || !c->writing.empty()) return;
  std::size_t n = c->out.size();
  if (holding()) {
    n = static_cast<std::size_t>(std::min<std::uint64_t>(n, c->released - c->sent));
    if (n < c->out.size()) hold(c);
  }
  if (n == 0) {
    if (c->out.empty() && c->closing) close(c);
    return;
  }
  if (n == c->out.size()) {
    c->writing.swap(c->out);
  } else {
    c->writing.assign(c->out, 0, n);
    c->out.erase(0, n);
  }
  c->sent += n;
  auto written = [this, c](std::error_code ec, std::size_t) {
    c->writing.clear();
    if (ec) {
      close(c);
      return;
    }
    flush(c);
    read(c);  // may have paused for back-pressure
  };
  if (c->tls) {
    asio::async_write(c->tls->stream, asio::buffer(c->writing), std::move(written));
  } else {
    asio::async_write(c->socket, asio::buffer(c->writing), std::move(written));
  }
}

void Server::Impl::close(const std::shared_ptr<Connection>& c) {
  if (c->closed) return;
  c->closed = true;
  std::error_code ignored;
  c->socket.shutdown(tcp::socket::shutdown_both, ignored);
  c->socket.close(ignored);
  if (connections.erase(c->id) > 0) {
    dispatcher->disconnect(c->id, Clock::now());
    deliver_wakeups();
  }
}

void Server::Impl::reschedule() {
  const auto next = dispatcher->next_wakeup();
  if (!next || (armed && *armed <= *next)) return;
  armed = *next;
  timer.expires_at(*next);
  timer.async_wait([this](std::error_code ec) {
    if (ec == asio::error::operation_aborted) return;
    armed.reset();
    dispatcher->advance(Clock::now());
    deliver_wakeups();
    reschedule();
  });
}

void Server::Impl::shutdown() {
  std::error_code ignored;
  for (Listener* l : {&plain, &secure}) {
    l->acceptor.close(ignored);
    l->retry_timer.cancel();
  }
  timer.cancel();
  sweep_timer.cancel();
  role_timer.cancel();
  signals.cancel(ignored);
  // Waiters leave without a reply before their connections close, so that closing
  // one cannot grant another's request that nobody would hear of.
  dispatcher->drop_waiters(Clock::now());
  auto all = connections;
  for (auto& [id, c] : all) close(c);
  io.stop();
}

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
  for (Impl::Listener* l : {&s.plain, &s.secure}) {
    if (l->acceptor.is_open()) s.start_accept(*l);
  }
  s.sweep();
  if (s.cell) s.watch_role();
  s.io.run();
  if (!s.cell) s.save_table();
}

void Server::stop() {
  asio::post(impl_->io, [s = impl_.get()] { s->shutdown(); });
}

void Server::reload_users() {
  asio::post(impl_->io, [s = impl_.get()] { s->reload_users(); });
}

std::uint16_t Server::port() const { return impl_->bound_port; }

std::uint16_t Server::tls_port() const { return impl_->bound_tls_port; }

std::uint16_t Server::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }

}  // namespace warden::server
