// server/cell/cell_state.h — what every member of a wardend cell holds: the grants.
//
// The leader runs the lock table (a Dispatcher) alone; its waiters, connections and
// clocks stay with it. What must survive it is what a client was told: every grant (its
// token, owner secret, lease length, lock-delay, permits, value), every running
// lock-delay, and the last token drawn. After each turn of its loop that changed any of
// that, the leader proposes one entry, CellChanges: the keys it changed, each with all it
// now holds, and the last token. Every member applies the entries in log order to a
// CellState, so each holds the same grants; a new leader restores its table from its
// own (docs/cell.md has the argument).
//
// An entry, little-endian:
//
//   size  field
//   ----  --------------------------------------------------------------------
//      1  kind (u8) = 1, a turn's changes
//      8  token_floor (u64): the last token the leader had drawn
//      4  key count K (u32)
//        K keys: length (u16), bytes
//      4  length L (u32) of what follows
//      L  the keys' holders and lock-delays, in the table snapshot's encoding
//         (server/table_snapshot.h) with reserved_upto = token_floor
//
// A member's snapshot (for the log to be cut behind it) is one such entry naming every
// key held.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/cell/raft_log.h"
#include "server/table_snapshot.h"

namespace warden::server::cell {

// The changes of one turn of the leader's loop.
struct CellChanges {
  std::uint64_t token_floor = 0;  // the last token drawn; every token held is at most this
  std::vector<std::string> keys;  // each replaced whole by what `held` has for it
  // The holders and lock-delays of `keys` (none for a key released and forgotten).
  std::vector<SnapshotHolder> holders;
  std::vector<SnapshotDelay> delays;

  friend bool operator==(const CellChanges&, const CellChanges&) = default;
};

std::string encode_changes(const CellChanges& changes);
// Throws Error(internal) for bytes encode_changes did not make: a holder or lock-delay
// of a key not named, a token above token_floor, a field out of range.
CellChanges decode_changes(std::string_view entry);

class CellState final : public StateMachine {
 public:
  // Applies one entry; one that does not decode ends the process (a member that skipped
  // it would hold other grants than the rest of the cell).
  void apply(std::string_view entry, std::uint64_t index) override;
  std::string snapshot() override;
  void restore(std::string_view state) override;

  // Thread-safe: everything held, as a table snapshot (state.reserved_upto: the last
  // token drawn), for a new leader to restore its table from.
  TableSnapshot held() const;
  // Thread-safe: how many keys hold something.
  std::size_t keys() const;

 private:
  struct Held {
    std::vector<SnapshotHolder> holders;
    std::vector<SnapshotDelay> delays;  // at most one
  };
  void replace(const CellChanges& changes);

  mutable std::mutex mutex_;
  std::uint64_t token_floor_ = 0;
  std::map<std::string, Held, std::less<>> keys_;
};

}  // namespace warden::server::cell
