// server/cell/cell_member.h — one wardend of a cell: its place in the cell, its
// replicated log (raft_log.h) and the grants the log holds (cell_state.h).
//
// `--cell 1@10.0.0.1:7380,2@10.0.0.2:7380,3@10.0.0.3:7380 --node 2`: every member is
// named by its id and the address its clients use; the members talk to each other on the
// next port (7381 here), the cell's bus. The library takes IPv4 addresses only.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/cell/cell_state.h"
#include "server/cell/raft_log.h"

namespace warden::server::cell {

struct CellOptions {
  std::string members;  // "id@a.b.c.d:port,...": the same on every member
  std::uint64_t node = 0;
  std::filesystem::path data_dir;  // the log goes in data_dir/cell
  std::chrono::milliseconds election_timeout{1000};
  std::chrono::milliseconds heartbeat{100};
  // A member added to a running cell (`wardend cell add`): it does not bootstrap the
  // members listed, it waits for the leader to send it the log.
  bool join = false;
};

// A member as its clients know it.
struct CellAddress {
  std::uint64_t id = 0;
  std::string host;  // IPv4, a.b.c.d
  std::uint16_t port = 0;
  std::string client_address() const { return host + ":" + std::to_string(port); }
  std::string bus_address() const { return host + ":" + std::to_string(port + 1); }
};

// The client address of a member whose bus is at `bus_address` (host:port).
std::optional<std::string> client_address_of(std::string_view bus_address);

// Parses `--cell`. Throws Error(invalid_argument) naming what is wrong: an empty list, a
// member without `id@`, an id that is not 1 and up or given twice, a host that is not an
// IPv4 address, a port not in 1..65534 (the bus takes the next one).
std::vector<CellAddress> parse_cell_members(std::string_view text);

class CellMember {
 public:
  // Starts the member's log (see RaftLog). Throws Error as parse_cell_members does, or
  // as RaftLog's constructor (invalid_argument, unavailable).
  explicit CellMember(const CellOptions& options);
  ~CellMember();

  // true while this member leads, with every earlier entry applied here.
  bool leading() const { return log_->leading(); }
  // The address clients reach the leader on, if one is known (this member included):
  // its bus address's port less one.
  std::optional<std::string> leader_address() const;
  // The members as the log last knew them, as `--cell` lists them.
  std::string members_text() const;
  // This member's id and how many members there are.
  std::uint64_t id() const { return id_; }
  const std::vector<CellAddress>& members() const { return members_; }

  // What the cell holds (CellState::held).
  TableSnapshot held() const { return state_.held(); }
  std::size_t keys_held() const { return state_.keys(); }
  // Proposes one turn's changes; `done` runs on the log's thread (RaftLog::propose).
  void propose(const CellChanges& changes, ProposeDone done);
  // Membership (RaftLog::add_member, remove_member); `done` runs on the log's thread.
  void add_member(const CellAddress& member, ChangeDone done);
  void remove_member(std::uint64_t id, ChangeDone done);

 private:
  std::uint64_t id_;
  std::vector<CellAddress> members_;
  CellState state_;
  int dir_lock_ = -1;             // holds the lock on data_dir/cell while the member runs
  std::unique_ptr<RaftLog> log_;  // last: stopped before the state it applies to
};

}  // namespace warden::server::cell
