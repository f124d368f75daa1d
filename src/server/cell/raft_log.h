// server/cell/raft_log.h — one member of a wardend cell's replicated log: Debian's C Raft
// library (libraft 0.15) on its libuv backend, on a thread of its own.
//
// Every member is given the same initial members; the first start bootstraps them, a
// restart finds its log in the data directory and replays it. A proposal made on the
// leader is appended, replicated, and applied to every member's StateMachine in log
// order once a majority stored it; only then is its proposer told `committed`. A
// member that does not lead refuses at once (`not_leader`), and leader() names the one
// that does, for a redirect.
//
// What libraft 0.15 needs of its user, and this class does:
// - an entry whose length is not a multiple of 8 bytes is cut from the log, with every
//   entry after it, when the log is loaded again: entries are framed (their length, then
//   the bytes, then zeros to a multiple of 8);
// - a write to a peer that has gone raises SIGPIPE: the process ignores SIGPIPE from the
//   first RaftLog on;
// - its election timer draws from rand(), unseeded: each process seeds it once;
// - it does not check that the heartbeat is shorter than the election timeout (its
//   assertions are compiled out): the constructor does;
// - a proposal whose leader stepped down before it committed (`lost`) may still be
//   committed and applied later: its outcome is unknown, and the StateMachine must not
//   take the proposer's word for it.
//
// Thread-safe, apart from the StateMachine: its calls, and every ProposeDone, run on the
// log's thread, in log order, and must not block it (a slow apply delays heartbeats and
// can cost the cell its leader).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace warden::server::cell {

// A member of the cell: its id (1 and up) and its address for the other members,
// IPv4 `a.b.c.d:port` (the library takes no host names).
struct Member {
  std::uint64_t id = 0;
  std::string address;
};

class StateMachine {
 public:
  virtual ~StateMachine() = default;
  // One committed entry, as proposed, at log position `index`. Deterministic: every
  // member applies the same entries in the same order and must end in the same state.
  // It must not throw (the process ends: a member that skipped an entry would diverge).
  virtual void apply(std::string_view entry, std::uint64_t index) = 0;
  // The whole state, for the log to be cut behind it.
  virtual std::string snapshot() = 0;
  // Replaces the whole state with one snapshot() made (on this member or another).
  virtual void restore(std::string_view state) = 0;
};

struct RaftLogConfig {
  std::uint64_t id = 0;
  std::vector<Member> members;  // the initial members, the same on every one of them
  std::filesystem::path data_dir;
  // A follower that hears no heartbeat for an election timeout (at random up to twice
  // it) stands for leader. Failing over takes about three election timeouts.
  std::chrono::milliseconds election_timeout{300};
  std::chrono::milliseconds heartbeat{50};  // shorter than the election timeout
  unsigned snapshot_threshold = 1024;       // entries applied between snapshots
  unsigned snapshot_trailing = 512;         // entries kept behind a snapshot for slow followers
  std::size_t segment_bytes = 1 << 20;      // the log's file size; three are kept open
  // A member added to a running cell (RaftLog::add_member on its leader): it starts
  // with an empty log and waits for the leader, instead of bootstrapping `members`.
  bool join = false;
};

enum class Proposed {
  committed,   // applied on this member; a majority has it
  not_leader,  // nothing was appended: ask leader()
  lost,        // the leader stepped down (or the log closed) first: may yet be applied
};

using ProposeDone = std::function<void(Proposed, std::uint64_t index)>;
// The end of a membership change: "" once it is committed, else why it was not made.
using ChangeDone = std::function<void(std::string error)>;

class RaftLog {
 public:
  struct Leader {
    std::uint64_t id = 0;
    std::string address;
  };

  // Starts the member: its log loaded from `data_dir` (made if missing), replayed into
  // `machine` as the leader confirms it. Throws warden::Error (invalid_argument for a
  // configuration the library would misbehave with, unavailable for a data directory or
  // address it cannot use). `machine` must outlive the RaftLog.
  RaftLog(RaftLogConfig config, StateMachine& machine);
  // Stops the member: proposals not yet committed are told `lost`.
  ~RaftLog();
  RaftLog(const RaftLog&) = delete;
  RaftLog& operator=(const RaftLog&) = delete;

  // Appends `entry` if this member leads; `done` is called once, on the log's thread.
  void propose(std::string entry, ProposeDone done);

  // Membership, on the leader; `done` is called once, on the log's thread. A member is
  // added as a spare, then made a voter once it has caught up with the log (the library
  // gives it 10 rounds of at most 5 s); one change at a time. Removing the leader
  // itself makes it step down once the change is committed.
  void add_member(Member member, ChangeDone done);
  void remove_member(std::uint64_t id, ChangeDone done);
  // The members as this member last knew them (the log's configuration).
  std::vector<Member> members() const;

  // The leader this member knows of (itself included), if any.
  std::optional<Leader> leader() const;
  // true while this member leads.
  bool leading() const;
  // The last entry applied to the StateMachine here.
  std::uint64_t applied_index() const;

 private:
  struct Loop;
  // Hands a change to the log's thread: an addition with `address`, else a removal.
  void post_change(std::uint64_t id, std::string address, ChangeDone done);
  std::unique_ptr<Loop> loop_;
};

// The framing of an entry in the log (exposed for its tests): the entry's length
// (4 bytes, little-endian), its bytes, zeros to a multiple of 8 bytes.
std::string frame_entry(std::string_view entry);
// The entry a framed buffer holds; nullopt if it is not one frame_entry made.
std::optional<std::string_view> unframe_entry(std::string_view framed);

}  // namespace warden::server::cell
