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
#include "server/cell/cell_member.h"
#include "server/durable_state.h"
#include "server/metrics_endpoint.h"
#include "server/resp.h"
#include "server/tls_context.h"
#include "warden/error.h"
#include "warden/version.h"

namespace warden::server {
namespace {

using asio::ip::tcp;

constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::size_t kTlsReadChunk = 4 * 1024;
constexpr auto kAcceptReportEvery = std::chrono::seconds(10);
constexpr auto kHandshakeReportEvery = std::chrono::seconds(10);
constexpr auto kPushOverflowReportEvery = std::chrono::seconds(10);
// How often connections are looked at for the AUTH deadline and the idle timeout: the
// deadlines are kept to within this.
constexpr auto kSweepEvery = std::chrono::milliseconds(500);
// TCP keep-alive after the first probe: one every 10 s, the peer gone after 3 unanswered.
constexpr int kKeepAliveInterval = 10;
constexpr int kKeepAliveProbes = 3;
// How often a cell member looks whether it leads (or stopped leading).
constexpr auto kCellRoleEvery = std::chrono::milliseconds(20);

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

std::string upper_case(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  return out;
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
  // What a TLS connection has beyond a plain one. Its reads cannot use the loop's shared
  // buffer: OpenSSL may hold decrypted bytes the socket no longer shows as readable, so
  // they are asynchronous reads into a buffer of its own (small: OpenSSL keeps a record
  // buffer of its own anyway).
  struct Tls {
    Tls(tcp::socket& socket, asio::ssl::context& context, asio::io_context& io)
        : stream(socket, context), handshake_timer(io) {}
    asio::ssl::stream<tcp::socket&> stream;
    asio::steady_timer handshake_timer;
    std::array<char, kTlsReadChunk> buffer{};
  };

  struct Connection : std::enable_shared_from_this<Connection> {
    Connection(Impl& s, tcp::socket sock, ConnId i)
        : server(s),
          socket(std::move(sock)),
          id(i),
          accepted_at(Clock::now()),
          last_heard(accepted_at) {}
    Impl& server;
    tcp::socket socket;
    std::unique_ptr<Tls> tls;  // null: plain text. Declared after `socket`, which it uses.
    ConnId id;
    std::string in;       // bytes read, not yet parsed
    std::string out;      // replies not yet handed to the socket
    std::string writing;  // the buffer of the write in flight
    bool reading = false;
    bool handshaking = false;  // TLS: neither read nor written until the handshake is done
    bool fresh = true;         // nothing read yet (a TLS hello on the plain port is refused)
    bool parked = false;
    bool closing = false;  // close once `out` is written
    bool closed = false;
    // A cell's leader writes a reply only once the cell cannot lose what it says: `sent`
    // counts the bytes ever moved from `out` to the socket, `released` how many of all
    // bytes ever put in `out` may be (a single wardend: all of them).
    std::uint64_t sent = 0;
    std::uint64_t released = std::numeric_limits<std::uint64_t>::max();
    bool unsealed = false;  // in Impl::unsealed: bytes in `out` await the next seal
    Clock::time_point accepted_at;
    Clock::time_point last_heard;  // when bytes last came from the client
  };

  // A reply's bytes up to each mark, on its connection, wait for one entry of the cell.
  struct Seal {
    std::vector<std::pair<std::shared_ptr<Connection>, std::uint64_t>> marks;
  };

  // A listening socket, plain or TLS, and its pause after running out of descriptors.
  struct Listener {
    Listener(asio::io_context& io, bool t) : acceptor(io), retry_timer(io), tls(t) {}
    tcp::acceptor acceptor;
    asio::steady_timer retry_timer;  // re-arms accepting after running out of descriptors
    std::chrono::milliseconds backoff{0};
    const bool tls;
  };

  Impl(ServerOptions o)
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

  std::unique_ptr<Dispatcher> make_dispatcher(table::TokenSource* tokens, GrantGuard* guard,
                                              std::function<std::string()> extra_info = {}) {
    DispatcherConfig config{options.limits, options.password, WARDEN_VERSION_STRING, started};
    config.extra_info = std::move(extra_info);
    auto made = std::make_unique<Dispatcher>(std::move(config), tokens, guard);
    if (users) made->set_users(users);
    return made;
  }

  // Binds `l`; returns the port it got. Throws Error(unavailable) naming the address.
  static std::uint16_t listen(Listener& l, const std::string& host, std::uint16_t port) {
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

  // Before anything is served: the table a clean shutdown left (the data dir's snapshot
  // is consumed by then), or why there is none to restore and the embargo applies.
  void restore_table() {
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

  // A clean shutdown, once the loop has stopped: nothing can be granted any more, so the
  // table now is the whole truth, and the next start restores it (server/table_snapshot.h).
  void save_table() {
    try {
      const auto table = dispatcher->snapshot(Clock::now());
      state->save_table(table);
      std::printf("wardend: saved %zu grant(s) and %zu lock-delay(s) for the next start\n",
                  table.holders.size(), table.delays.size());
    } catch (const Error& e) {
      std::fprintf(stderr, "wardend: %s; the next start waits out the restart embargo\n", e.what());
    }
  }

  // The Prometheus text, rendered on the loop thread (which owns every number in it).
  std::string snapshot() {
    std::promise<std::string> promise;
    auto future = promise.get_future();
    asio::post(io, [this, &promise] { promise.set_value(render_metrics(dispatcher->stats())); });
    if (future.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      return "# wardend is not answering\n";
    }
    return future.get();
  }

  void start_accept(Listener& l) {
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

  // The TLS handshake, bounded by handshake_timeout; then the connection is served like
  // a plain one (or gets its -LIMIT and is closed).
  void handshake(const std::shared_ptr<Connection>& c) {
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

  // One stderr line per failed handshake, at most one per kHandshakeReportEvery (a
  // scanner or a misconfigured fleet must not flood the log); the lines in between are
  // counted in the next one.
  void report_handshake_failure(const std::shared_ptr<Connection>& c, const std::string& why) {
    ++handshake_failures;
    const auto now = Clock::now();
    if (now < next_handshake_report) return;
    std::error_code ec;
    const auto peer = c->socket.remote_endpoint(ec);
    const std::string who = ec ? std::string("a client")
                               : peer.address().to_string() + ":" + std::to_string(peer.port());
    const std::string others = handshake_failures > 1
                                   ? " (and " + std::to_string(handshake_failures - 1) +
                                         " other failure(s) since the last report)"
                                   : std::string();
    std::fprintf(stderr, "wardend: TLS handshake with %s failed: %s%s; connection closed\n",
                 who.c_str(), why.c_str(), others.c_str());
    handshake_failures = 0;
    next_handshake_report = now + kHandshakeReportEvery;
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

  void accept_later(Listener& l, std::error_code ec) {
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

  void read(const std::shared_ptr<Connection>& c) {
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

  // What a read brought: `n` bytes at `data`, or the end of the stream, or an error.
  void received(const std::shared_ptr<Connection>& c, std::error_code ec, const char* data,
                std::size_t n) {
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

  // Runs `handle` on every complete request buffered on `c`, in order, until one parks
  // or closes the connection; a malformed one is answered and closes it. The request's
  // arguments point into `c->in`, which `handle` must leave alone.
  template <typename Handle>
  void take_requests(const std::shared_ptr<Connection>& c, Handle&& handle) {
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
      if (!parsed.args.empty()) handle(std::span<const std::string_view>(parsed.args));
    }
    c->in.erase(0, offset);
  }

  // Executes every complete request buffered on `c`, up to a parked one.
  void process(const std::shared_ptr<Connection>& c) {
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

  // --users: the table, and the threads that check passwords off the loop (two at most,
  // so an AUTH flood costs at most two hashes' memory; see auth_worker.h).
  void start_users() {
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

  // On the loop (SIGHUP): a good file replaces the table, a bad one keeps it.
  void reload_users() {
    if (options.users_file.empty()) return;
    try {
      users = read_users_file(options.users_file);
      const std::size_t n = users->size();
      dispatcher->set_users(users);
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

  // One stderr line per kPushOverflowReportEvery at most, as for failed handshakes.
  void report_push_overflow(const std::shared_ptr<Connection>& c) {
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

  bool auth_required() const { return !options.password.empty() || !options.users_file.empty(); }

  // Closes the connections past their AUTH deadline (told why) or idle too long, every
  // kSweepEvery, while either applies.
  void sweep() {
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

  void flush(const std::shared_ptr<Connection>& c) {
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

  void close(const std::shared_ptr<Connection>& c) {
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

  // Arms the timer for the table's next wake-up if that is earlier than the one armed.
  // A timer that fires with nothing due only advances the table and re-arms, so it is
  // never cancelled: cancelling when the table empties and re-arming on the next
  // acquire would cost two timerfd syscalls per lock cycle.
  void reschedule() {
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

  // --- a cell's member (server/cell/; docs/cell.md)

  // Joins the cell: listens on this member's address from --cell, serves nothing until
  // it leads.
  void start_cell() {
    cell::CellOptions o;
    o.members = options.cell;
    o.node = options.node;
    o.data_dir = options.data_dir;
    o.election_timeout = options.cell_election_timeout;
    o.heartbeat = options.cell_heartbeat;
    o.join = options.cell_join;
    const auto members = cell::parse_cell_members(o.members);
    const auto self = std::find_if(members.begin(), members.end(),
                                   [&](const cell::CellAddress& m) { return m.id == o.node; });
    if (self == members.end()) {
      throw Error(Errc::invalid_argument,
                  "--node " + std::to_string(o.node) + " is not one of the members --cell lists");
    }
    // The member's address is where its clients connect: the plain listener's, or with
    // `--listen none` the TLS listener's (a wardens:// cell; -MOVED names it).
    if (options.listen_plain) {
      options.host = self->host;
      options.port = self->port;
    } else if (options.tls) {
      options.tls->host = self->host;
      options.tls->port = self->port;
    }
    serving = false;
    dispatcher = make_dispatcher(nullptr, nullptr);
    cell = std::make_unique<cell::CellMember>(o);
    std::printf("wardend: cell member %llu of %zu; its bus on %s\n",
                static_cast<unsigned long long>(o.node), members.size(),
                self->bus_address().c_str());
  }

  // A leader that does not lead any more cannot make anything it says durable.
  bool holding() const { return cell != nullptr && serving; }

  // A member that does not lead answers PING and QUIT, and every other request with
  // where the leader is (-MOVED host:port), or -TRYAGAIN while the cell has none. AUTH,
  // and whatever comes before it when AUTH is required, its dispatcher answers as the
  // leader's would: a client authenticates before it asks where the leader is, and
  // nobody learns it without the password.
  void redirect(const std::shared_ptr<Connection>& c) {
    take_requests(c, [&](std::span<const std::string_view> args) {
      const std::string cmd = upper_case(args[0]);
      if (cmd == "AUTH" || !dispatcher->authenticated(c->id)) {
        const auto outcome = dispatcher->execute(c->id, args, Clock::now(), c->out);
        if (outcome == Dispatcher::Outcome::parked) c->parked = true;
        if (outcome == Dispatcher::Outcome::close) c->closing = true;
      } else if (cmd == "PING") {
        c->out += "+PONG\r\n";
      } else if (cmd == "QUIT") {
        c->out += "+OK\r\n";
        c->closing = true;
      } else if (const auto leader = cell->leader_address(); leader && !cell->leading()) {
        resp::error(c->out, "MOVED", *leader);
      } else {
        resp::error(c->out, "TRYAGAIN", "the cell has no leader yet");
      }
    });
    deliver_wakeups();  // a password check to start
    flush(c);
    read(c);
  }

  // `c` has bytes the next seal must cover.
  void hold(const std::shared_ptr<Connection>& c) {
    if (!c->unsealed) {
      c->unsealed = true;
      unsealed.push_back(c);
    }
    post_seal();
  }

  void post_seal() {
    if (!holding() || seal_posted) return;
    seal_posted = true;
    asio::post(io, [this] { seal(); });
  }

  // Once per turn of the loop, after the requests and timers that were ready: what this
  // turn changed goes to the cell as one entry, and the replies written meanwhile wait
  // for it. When nothing changed, they wait for the entries before it, or with none an
  // empty entry: a reply (a CHECK, a read) is only ever sent by a member that the cell
  // still followed after it was written, never by a leader deposed without knowing it.
  void seal() {
    seal_posted = false;
    if (!holding()) return;
    std::vector<std::string> keys = dispatcher->take_changed_keys();
    Seal turn;
    for (auto& c : unsealed) {
      c->unsealed = false;
      if (!c->closed) turn.marks.emplace_back(c, c->sent + c->out.size());
    }
    unsealed.clear();
    if (keys.empty()) {
      if (turn.marks.empty()) return;
      if (!seals.empty()) {
        auto& last = seals.back().marks;
        last.insert(last.end(), turn.marks.begin(), turn.marks.end());
        return;
      }
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    cell::CellChanges changes;
    changes.token_floor = dispatcher->last_token();
    TableSnapshot held = dispatcher->snapshot_keys(keys, Clock::now());
    changes.keys = std::move(keys);
    changes.holders = std::move(held.holders);
    changes.delays = std::move(held.delays);
    seals.push_back(std::move(turn));
    cell->propose(changes, [this, leadership = epoch](cell::Proposed outcome, std::uint64_t) {
      asio::post(io, [this, leadership, outcome] { sealed(leadership, outcome); });
    });
  }

  // The oldest seal's entry was committed (its replies go) or not (the leadership ends).
  void sealed(std::uint64_t leadership, cell::Proposed outcome) {
    if (leadership != epoch || seals.empty()) return;
    if (outcome != cell::Proposed::committed) {
      return step_down("a change could not be committed (the cell elected another leader)");
    }
    Seal done = std::move(seals.front());
    seals.pop_front();
    release(done);
  }

  void release(const Seal& seal) {
    for (const auto& [c, upto] : seal.marks) {
      c->released = std::max(c->released, upto);
      flush(c);
    }
  }

  // Every kCellRoleEvery: starts serving once this member leads, stops when it does not.
  void watch_role() {
    role_timer.expires_after(kCellRoleEvery);
    role_timer.async_wait([this](std::error_code ec) {
      if (ec) return;
      const bool leads = cell->leading();
      if (leads && !serving) lead();
      if (!leads && serving) step_down("another member leads the cell");
      watch_role();
    });
  }

  // What the leader's INFO says of its cell: the members as its log knows them.
  std::string cell_info() const {
    const auto& [host, port] = options.listen_plain || !options.tls
                                   ? std::pair(options.host, options.port)
                                   : std::pair(options.tls->host, options.tls->port);
    return "cell:" + cell->members_text() + "\r\ncell_node:" + std::to_string(cell->id()) +
           "\r\ncell_leader:" + host + ":" + std::to_string(port) + "\r\n";
  }

  // CELL ADD id@a.b.c.d:port, CELL REMOVE id: a membership change, answered once it is
  // committed (or refused); the connection waits for it like a parked ACQUIRE.
  bool cell_command(const std::shared_ptr<Connection>& c, std::span<const std::string_view> args) {
    if (upper_case(args[0]) != "CELL") return false;
    if (!dispatcher->may_administer(c->id)) {
      resp::error(c->out, "NOPERM", "changing the cell's members needs the --requirepass user");
      return true;
    }
    const std::string sub = args.size() > 1 ? upper_case(args[1]) : "";
    auto answer = [this, c](std::string error) {
      asio::post(io, [this, c, error = std::move(error)] {
        if (c->closed) return;
        if (error.empty()) {
          c->out += "+OK\r\n";
        } else {
          resp::error(c->out, "ERR", "cell: " + error);
        }
        c->parked = false;
        process(c);
        reschedule();
      });
    };
    try {
      if (sub == "ADD" && args.size() == 3) {
        const auto members = cell::parse_cell_members(args[2]);
        if (members.size() != 1) throw Error(Errc::invalid_argument, "name one member");
        cell->add_member(members.front(), answer);
      } else if (sub == "REMOVE" && args.size() == 3) {
        const auto id = core::parse_int_in_range(args[2], 1, 1'000'000);
        if (!id) throw Error(Errc::invalid_argument, "the id must be a number from 1 to 1000000");
        cell->remove_member(static_cast<std::uint64_t>(*id), answer);
      } else {
        throw Error(Errc::invalid_argument, "expected CELL ADD id@a.b.c.d:port or CELL REMOVE id");
      }
    } catch (const Error& e) {
      resp::error(c->out, "ERR", e.what());
      return true;
    }
    c->parked = true;
    return true;
  }

  // This member leads, every entry before its leadership applied: its table starts from
  // what the cell holds, each grant with a full lease from now.
  void lead() {
    drop_connections();  // they were told -MOVED or -TRYAGAIN
    const TableSnapshot held = cell->held();
    dispatcher.reset();
    cell_tokens = std::make_unique<table::CountingTokenSource>(held.state.reserved_upto);
    dispatcher = make_dispatcher(cell_tokens.get(), nullptr, [this] { return cell_info(); });
    const std::size_t grants = dispatcher->restore(held, Clock::now());
    dispatcher->record_changes();
    ++epoch;
    serving = true;
    rearm();
    std::printf(
        "wardend: cell member %llu leads: restored %zu grant(s) and %zu lock-delay(s); tokens "
        "continue after %llu\n",
        static_cast<unsigned long long>(cell->id()), grants, held.delays.size(),
        static_cast<unsigned long long>(held.state.reserved_upto));
    std::fflush(stdout);
  }

  // Nothing this member answers from now on could be made durable: every connection
  // closes without the replies it was still owed, and the table goes.
  void step_down(const std::string& why) {
    if (!serving) return;
    serving = false;
    ++epoch;
    seals.clear();
    for (auto& c : unsealed) c->unsealed = false;
    unsealed.clear();
    drop_connections();
    dispatcher = make_dispatcher(nullptr, nullptr);
    cell_tokens.reset();
    rearm();
    std::fprintf(stderr, "wardend: cell member %llu stops serving: %s\n",
                 static_cast<unsigned long long>(cell->id()), why.c_str());
  }

  void drop_connections() {
    auto all = connections;
    for (auto& [id, c] : all) close(c);
  }

  // A new table's wake-ups, not the old one's.
  void rearm() {
    timer.cancel();
    armed.reset();
    reschedule();
  }

  void shutdown() {
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

  ServerOptions options;
  Clock::time_point started = Clock::now();
  std::optional<DurableState> state;  // a single wardend's; a cell's is its log
  std::shared_ptr<const UserTable> users;
  std::unique_ptr<table::CountingTokenSource> cell_tokens;  // a cell leader's, from the cell
  std::unique_ptr<Dispatcher> dispatcher;
  asio::io_context io;
  std::optional<asio::ssl::context> tls_context;  // with a TLS listener
  Listener plain;                                 // open unless `--listen none`
  Listener secure;                                // open with a TLS listener
  std::uint64_t accept_failures = 0;              // since the last report on stderr
  Clock::time_point next_accept_report;
  std::uint64_t handshake_failures = 0;  // since the last report on stderr
  Clock::time_point next_handshake_report;
  asio::steady_timer timer;
  std::optional<Clock::time_point> armed;
  asio::signal_set signals;
  asio::steady_timer sweep_timer;    // AUTH deadlines and the idle timeout
  std::uint64_t push_overflows = 0;  // since the last report on stderr
  Clock::time_point next_push_overflow_report;
  std::unordered_map<ConnId, std::shared_ptr<Connection>> connections;
  std::array<char, kReadChunk> read_buffer{};  // shared: the loop reads one socket at a time
  ConnId next_id = 0;
  std::uint16_t bound_port = 0;
  std::uint16_t bound_tls_port = 0;
  std::unique_ptr<MetricsEndpoint> metrics;
  // A cell member's (null for a single wardend). After `io`: stopping it tells the
  // proposals in flight `lost`, which post to the loop.
  std::unique_ptr<cell::CellMember> cell;
  bool serving = true;      // false while a cell member does not lead
  std::uint64_t epoch = 0;  // counts leaderships: a seal's outcome from an earlier one is void
  std::deque<Seal> seals;   // proposed, not yet committed, in log order
  std::vector<std::shared_ptr<Connection>> unsealed;
  bool seal_posted = false;
  asio::steady_timer role_timer;
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
