// server/durable_state.h — wardend's data dir as the dispatcher sees it: the token
// source, the grant guard (restart embargo, durable longest hold), and the table carried
// over a clean shutdown (server/table_snapshot.h).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "server/dispatcher.h"
#include "server/durable_tokens.h"
#include "server/table_snapshot.h"

namespace warden::server {

class DurableState final : public GrantGuard {
 public:
  // Opens (or creates) the data dir and consumes the table snapshot a clean shutdown left
  // there (before returning, so before anything is served). With a valid snapshot there
  // is no restart embargo; without one (a crash, a damaged snapshot) the embargo applies.
  // Throws warden::Error for a damaged state, or a snapshot that cannot be consumed.
  DurableState(const std::string& data_dir, bool reset_state);

  DurableTokens& tokens() { return tokens_; }

  std::uint64_t embargo_ms(Time now) const override;
  void note_hold(std::chrono::milliseconds ttl_plus_delay) override;

  // The snapshot to restore into the table, handed out once; nullopt when the start was
  // not clean (or it was taken already).
  std::optional<TableSnapshot> take_restored() { return std::exchange(taken_.snapshot, {}); }
  // Why a snapshot found at start was not restored (it names the file and the defect);
  // empty when there was none, or it was restored.
  const std::string& snapshot_defect() const { return taken_.defect; }

  // A clean shutdown: makes the table durable for the next start, stamped with the
  // current state record. Throws Error(unavailable) if it cannot (the next start then
  // waits out the embargo, as after a crash).
  void save_table(TableSnapshot snapshot);

 private:
  DurableState(StateFile file, Time started);

  TableSnapshotFile::Taken taken_;  // before tokens_: it is taken before the file moves
  DurableTokens tokens_;
};

}  // namespace warden::server
