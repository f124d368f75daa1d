#include "server/cell/cell_member.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "core/uri.h"
#include "warden/error.h"

namespace warden::server::cell {
namespace {

Error bad_members(const std::string& what) {
  return Error(Errc::invalid_argument, "--cell: " + what);
}

CellAddress parse_member(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  const auto at = text.find('@');
  if (at == std::string_view::npos) throw bad_members(quoted + " is not id@a.b.c.d:port");
  const auto id = core::parse_int_in_range(text.substr(0, at), 1, 1'000'000);
  if (!id) throw bad_members(quoted + ": the id must be a number from 1 to 1000000");
  const std::string_view address = text.substr(at + 1);
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) throw bad_members(quoted + " has no port");
  CellAddress m;
  m.id = static_cast<std::uint64_t>(*id);
  m.host = std::string(address.substr(0, colon));
  in_addr ip{};
  if (::inet_pton(AF_INET, m.host.c_str(), &ip) != 1) {
    throw bad_members(quoted + ": '" + m.host +
                      "' is not an IPv4 address (the cell's log takes no "
                      "host names or IPv6)");
  }
  const auto port = core::parse_int_in_range(address.substr(colon + 1), 1, 65534);
  if (!port) {
    throw bad_members(quoted + ": the port must be 1 to 65534 (the cell's bus takes the next one)");
  }
  m.port = static_cast<std::uint16_t>(*port);
  return m;
}

// Locks `dir` (made if missing) for this process: two members on one log would each
// take the other's writes for their own. Returns the descriptor that holds the lock.
int lock_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error(Errc::unavailable, "cannot create " + dir.string() + ": " + ec.message());
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(Errc::unavailable, "cannot open " + dir.string() + ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw Error(Errc::unavailable, "the cell's log in " + dir.string() +
                                       " is in use by another wardend (it is locked)");
  }
  return fd;
}

}  // namespace

std::vector<CellAddress> parse_cell_members(std::string_view text) {
  std::vector<CellAddress> members;
  std::set<std::uint64_t> ids;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view one = text.substr(0, comma);
    members.push_back(parse_member(one));
    if (!ids.insert(members.back().id).second) {
      throw bad_members("member " + std::to_string(members.back().id) + " is given twice");
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) throw bad_members("a member is missing after the last ','");
  }
  if (members.empty()) throw bad_members("no members");
  return members;
}

CellMember::CellMember(const CellOptions& options)
    : id_(options.node), members_(parse_cell_members(options.members)) {
  RaftLogConfig config;
  config.id = options.node;
  for (const CellAddress& m : members_) config.members.push_back({m.id, m.bus_address()});
  config.data_dir = options.data_dir / "cell";
  config.election_timeout = options.election_timeout;
  config.heartbeat = options.heartbeat;
  config.join = options.join;
  config.snapshot_threshold = 16384;
  config.snapshot_trailing = 4096;
  dir_lock_ = lock_directory(config.data_dir);
  try {
    log_ = std::make_unique<RaftLog>(std::move(config), state_);
  } catch (...) {
    ::close(dir_lock_);
    throw;
  }
}

CellMember::~CellMember() {
  log_.reset();
  ::close(dir_lock_);
}

std::optional<std::string> client_address_of(std::string_view bus_address) {
  const auto colon = bus_address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port = core::parse_int_in_range(bus_address.substr(colon + 1), 2, 65535);
  if (!port) return std::nullopt;
  return std::string(bus_address.substr(0, colon)) + ":" + std::to_string(*port - 1);
}

std::optional<std::string> CellMember::leader_address() const {
  const auto leader = log_->leader();
  if (!leader) return std::nullopt;
  return client_address_of(leader->address);
}

std::string CellMember::members_text() const {
  std::string out;
  for (const Member& m : log_->members()) {
    const auto client = client_address_of(m.address);
    out += (out.empty() ? "" : ",") + std::to_string(m.id) + "@" + client.value_or(m.address);
  }
  return out;
}

void CellMember::add_member(const CellAddress& member, ChangeDone done) {
  log_->add_member(Member{member.id, member.bus_address()}, std::move(done));
}

void CellMember::remove_member(std::uint64_t id, ChangeDone done) {
  log_->remove_member(id, std::move(done));
}

void CellMember::propose(const CellChanges& changes, ProposeDone done) {
  log_->propose(encode_changes(changes), std::move(done));
}

}  // namespace warden::server::cell
