// server/server_impl.h — what a Server is made of: its listeners, connections, the
// dispatcher and, for a cell's member, its place in the cell. Private to the server:
// server.cc defines the network shell's functions, server_cell.cc a cell member's
// (which member serves, and how its replies wait for the cell).
#pragma once

#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/auth_worker.h"
#include "server/cell/cell_member.h"
#include "server/dispatcher.h"
#include "server/durable_state.h"
#include "server/metrics_endpoint.h"
#include "server/resp.h"
#include "server/server.h"
#include "table/lock_table.h"

namespace warden::server {

// The loop's one read buffer (plain connections), and a TLS connection's own.
inline constexpr std::size_t kReadChunk = 16 * 1024;
inline constexpr std::size_t kTlsReadChunk = 4 * 1024;

struct Server::Impl {
  // What a TLS connection has beyond a plain one. Its reads cannot use the loop's shared
  // buffer: OpenSSL may hold decrypted bytes the socket no longer shows as readable, so
  // they are asynchronous reads into a buffer of its own (small: OpenSSL keeps a record
  // buffer of its own anyway).
  struct Tls {
    Tls(asio::ip::tcp::socket& socket, asio::ssl::context& context, asio::io_context& io)
        : stream(socket, context), handshake_timer(io) {}
    asio::ssl::stream<asio::ip::tcp::socket&> stream;
    asio::steady_timer handshake_timer;
    std::array<char, kTlsReadChunk> buffer{};
  };

  struct Connection : std::enable_shared_from_this<Connection> {
    Connection(Impl& s, asio::ip::tcp::socket sock, ConnId i)
        : server(s),
          socket(std::move(sock)),
          id(i),
          accepted_at(Clock::now()),
          last_heard(accepted_at) {}
    Impl& server;
    asio::ip::tcp::socket socket;
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
    asio::ip::tcp::acceptor acceptor;
    asio::steady_timer retry_timer;  // re-arms accepting after running out of descriptors
    std::chrono::milliseconds backoff{0};
    const bool tls;
  };

  Impl(ServerOptions o);

  std::unique_ptr<Dispatcher> make_dispatcher(table::TokenSource* tokens, GrantGuard* guard,
                                              std::function<std::string()> extra_info = {});

  // Binds `l`; returns the port it got. Throws Error(unavailable) naming the address.
  static std::uint16_t listen(Listener& l, const std::string& host, std::uint16_t port);

  // Before anything is served: the table a clean shutdown left (the data dir's snapshot
  // is consumed by then), or why there is none to restore and the embargo applies.
  void restore_table();

  // A clean shutdown, once the loop has stopped: nothing can be granted any more, so the
  // table now is the whole truth, and the next start restores it (server/table_snapshot.h).
  void save_table();

  // The Prometheus text, rendered on the loop thread (which owns every number in it).
  std::string snapshot();

  void start_accept(Listener& l);

  // The TLS handshake, bounded by handshake_timeout; then the connection is served like
  // a plain one (or gets its -LIMIT and is closed).
  void handshake(const std::shared_ptr<Connection>& c);

  // One stderr line per failed handshake, at most one per kHandshakeReportEvery (a
  // scanner or a misconfigured fleet must not flood the log); the lines in between are
  // counted in the next one.
  void report_handshake_failure(const std::shared_ptr<Connection>& c, const std::string& why);

  // EMFILE, ENFILE, ENOBUFS, ENOMEM: no descriptor or memory for a new connection. The
  // pending connection stays in the backlog, so accepting again at once would fail again
  // at once, forever, at full CPU. Instead: pause accepting (10 ms, doubling up to 1 s),
  // keep serving every connection we have (closing one frees a descriptor), and say so
  // on stderr at most once per kAcceptReportEvery.
  static bool out_of_descriptors(std::error_code ec);

  void accept_later(Listener& l, std::error_code ec);

  void read(const std::shared_ptr<Connection>& c);

  // What a read brought: `n` bytes at `data`, or the end of the stream, or an error.
  void received(const std::shared_ptr<Connection>& c, std::error_code ec, const char* data,
                std::size_t n);

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
  void process(const std::shared_ptr<Connection>& c);

  // --users: the table, and the threads that check passwords off the loop (two at most,
  // so an AUTH flood costs at most two hashes' memory; see auth_worker.h).
  void start_users();

  // On the loop (SIGHUP): a good file replaces the table, a bad one keeps it.
  void reload_users();

  // SIGHUP reloads the users file and waits again; SIGINT and SIGTERM stop the server.
  void wait_for_signal();

  // Hands replies of resolved parked requests to their connections and resumes them.
  void deliver_wakeups();

  // One stderr line per kPushOverflowReportEvery at most, as for failed handshakes.
  void report_push_overflow(const std::shared_ptr<Connection>& c);

  bool auth_required() const { return !options.password.empty() || !options.users_file.empty(); }

  // Closes the connections past their AUTH deadline (told why) or idle too long, every
  // kSweepEvery, while either applies.
  void sweep();

  void flush(const std::shared_ptr<Connection>& c);

  void close(const std::shared_ptr<Connection>& c);

  // Arms the timer for the table's next wake-up if that is earlier than the one armed.
  // A timer that fires with nothing due only advances the table and re-arms, so it is
  // never cancelled: cancelling when the table empties and re-arming on the next
  // acquire would cost two timerfd syscalls per lock cycle.
  void reschedule();

  // --- a cell's member (server/cell/; docs/cell.md)

  // Joins the cell: listens on this member's address from --cell, serves nothing until
  // it leads.
  void start_cell();

  // A leader that does not lead any more cannot make anything it says durable.
  bool holding() const { return cell != nullptr && serving; }

  // A member that does not lead answers PING and QUIT, and every other request with
  // where the leader is (-MOVED host:port), or -TRYAGAIN while the cell has none. AUTH,
  // and whatever comes before it when AUTH is required, its dispatcher answers as the
  // leader's would: a client authenticates before it asks where the leader is, and
  // nobody learns it without the password.
  void redirect(const std::shared_ptr<Connection>& c);

  // `c` has bytes the next seal must cover.
  void hold(const std::shared_ptr<Connection>& c);

  void post_seal();

  // Once per turn of the loop, after the requests and timers that were ready: what this
  // turn changed goes to the cell as one entry, and the replies written meanwhile wait
  // for it. When nothing changed, they wait for the entries before it, or with none an
  // empty entry: a reply (a CHECK, a read) is only ever sent by a member that the cell
  // still followed after it was written, never by a leader deposed without knowing it.
  void seal();

  // The oldest seal's entry was committed (its replies go) or not (the leadership ends).
  void sealed(std::uint64_t leadership, cell::Proposed outcome);

  void release(const Seal& seal);

  // Every kCellRoleEvery: starts serving once this member leads, stops when it does not.
  void watch_role();

  // What the leader's INFO says of its cell: the members as its log knows them.
  std::string cell_info() const;

  // CELL ADD id@a.b.c.d:port, CELL REMOVE id: a membership change, answered once it is
  // committed (or refused); the connection waits for it like a parked ACQUIRE.
  bool cell_command(const std::shared_ptr<Connection>& c, std::span<const std::string_view> args);

  // This member leads, every entry before its leadership applied: its table starts from
  // what the cell holds, each grant with a full lease from now.
  void lead();

  // Nothing this member answers from now on could be made durable: every connection
  // closes without the replies it was still owed, and the table goes.
  void step_down(const std::string& why);

  void drop_connections();

  // A new table's wake-ups, not the old one's.
  void rearm();

  void shutdown();

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

}  // namespace warden::server
