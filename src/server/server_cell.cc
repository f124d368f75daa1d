// server/server_cell.cc — a wardend cell's member (docs/cell.md): it serves only while
// it leads; its table's changes go to the cell once per loop turn, and every reply waits
// for its turn's entry to be committed; a follower sends its clients to the leader.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/uri.h"
#include "server/server_impl.h"
#include "warden/error.h"

namespace warden::server {
namespace {

// How often a cell member looks whether it leads (or stopped leading).
constexpr auto kCellRoleEvery = std::chrono::milliseconds(20);

std::string upper_case(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  return out;
}

}  // namespace

void Server::Impl::start_cell() {
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
              static_cast<unsigned long long>(o.node), members.size(), self->bus_address().c_str());
}

void Server::Impl::redirect(const std::shared_ptr<Connection>& c) {
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

void Server::Impl::hold(const std::shared_ptr<Connection>& c) {
  if (!c->unsealed) {
    c->unsealed = true;
    unsealed.push_back(c);
  }
  post_seal();
}

void Server::Impl::post_seal() {
  if (!holding() || seal_posted) return;
  seal_posted = true;
  asio::post(io, [this] { seal(); });
}

void Server::Impl::seal() {
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

void Server::Impl::sealed(std::uint64_t leadership, cell::Proposed outcome) {
  if (leadership != epoch || seals.empty()) return;
  if (outcome != cell::Proposed::committed) {
    return step_down("a change could not be committed (the cell elected another leader)");
  }
  Seal done = std::move(seals.front());
  seals.pop_front();
  release(done);
}

void Server::Impl::release(const Seal& seal) {
  for (const auto& [c, upto] : seal.marks) {
    c->released = std::max(c->released, upto);
    flush(c);
  }
}

void Server::Impl::watch_role() {
  role_timer.expires_after(kCellRoleEvery);
  role_timer.async_wait([this](std::error_code ec) {
    if (ec) return;
    const bool leads = cell->leading();
    if (leads && !serving) lead();
    if (!leads && serving) step_down("another member leads the cell");
    watch_role();
  });
}

std::string Server::Impl::cell_info() const {
  const auto& [host, port] = options.listen_plain || !options.tls
                                 ? std::pair(options.host, options.port)
                                 : std::pair(options.tls->host, options.tls->port);
  return "cell:" + cell->members_text() + "\r\ncell_node:" + std::to_string(cell->id()) +
         "\r\ncell_leader:" + host + ":" + std::to_string(port) + "\r\n";
}

bool Server::Impl::cell_command(const std::shared_ptr<Connection>& c,
                                std::span<const std::string_view> args) {
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

void Server::Impl::lead() {
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

void Server::Impl::step_down(const std::string& why) {
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

void Server::Impl::drop_connections() {
  auto all = connections;
  for (auto& [id, c] : all) close(c);
}

void Server::Impl::rearm() {
  timer.cancel();
  armed.reset();
  reschedule();
}

}  // namespace warden::server
