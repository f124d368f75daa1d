// server/table_snapshot.h — the lock table written at a clean shutdown, read back once.
//
// A planned restart should not cost the restart embargo (server/durable_tokens.h): when
// wardend stops on SIGTERM/SIGINT, nothing can be granted any more once its listener and
// connections are closed, so the table it holds then is the whole truth. It writes that
// table here; the next start restores the holders (tokens, owner secrets, a full lease
// from the restart) and the running lock-delays, and grants free locks at once. The
// argument is in docs/server.md (Durability); the rules it rests on:
//
//   - the file is the "clean mark": present only if the last run ended by writing it;
//   - a start consumes it — deletes it (or moves a damaged one aside to `table.damaged`)
//     and fsyncs the directory — before serving anything, so a crash after the restart
//     can never restore it again (that start finds no file: the crash rule applies);
//   - it carries the state file's record as it was when written; a snapshot whose record
//     is not the current one does not belong to this state and is not restored;
//   - anything short of a valid, matching file is "not clean": the defect is reported and
//     the crash rule (the embargo) applies; a damaged snapshot never stops a start.
//
// On disk: `<dir>/table`, little-endian:
//
//   offset  size  field
//   ------  ----  ---------------------------------------------------------------
//        0    12  magic "WARDEN-TABLE" (ASCII, no terminator)
//       12     4  format version (u32) = 1
//       16     8  reserved_upto (u64) of the state file when written
//       24     8  max_hold_ms (u64) of the state file when written
//       32     4  holder count H (u32)
//       36     4  lock-delay count D (u32)
//       40        H holder records:  mode (u8: 0 exclusive, 1 shared, 2 a semaphore's,
//                 3 an election's leader: exclusive, with a value), key length (u16), key
//                 ("group/name"), token (u64), owner secret (16 bytes), ttl_ms (u64),
//                 lock_delay_ms (u64); mode 2 only: the semaphore's permits (u32) and this
//                 grant's permits (u32); mode 3 only: value length (u16, 1 .. 4096), value
//                 D lock-delay records: key length (u16), key, left_ms (u64)
//    end-4     4  CRC-32C (Castagnoli) of every byte before it (u32)
//
// A file decodes only if every field is valid and consistent: keys valid lock identities,
// ttl 10 ms .. 7 days, lock-delay 0 .. 1 h, ttl + lock_delay and every left_ms within
// max_hold_ms (every hold was made durable before it was granted), tokens 1 ..
// reserved_upto and each held once, one exclusive or only shared holders per key (or
// only a semaphore's, of one number of permits, holding no more than it has), one
// lock-delay per key. So a decoded snapshot can always be restored whole. Mode 2 came
// with semaphores and mode 3 with elections: a wardend from before reads a snapshot
// holding one as damaged and starts under the restart embargo, which is safe. Encoding is
// canonical: a file that decodes is byte for byte the encoding of what it decoded to.
//
// Thread safety: none needed; plain functions over values and one directory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/state_file.h"
#include "warden/types.h"

namespace warden::server {

// One grant held at the clean shutdown.
struct SnapshotHolder {
  std::string key;  // "group/name", as the table keys it
  Mode mode = Mode::exclusive;
  std::uint64_t token = 0;
  std::array<unsigned char, 16> secret{};  // the owner secret RENEW and RELEASE present
  std::uint64_t ttl_ms = 0;                // its lease length; restored in full
  std::uint64_t lock_delay_ms = 0;         // applied if the restored lease expires
  std::uint32_t capacity = 0;              // a semaphore's permits (mode shared); 0: a lock
  std::uint32_t permits = 0;               // the permits this grant of a semaphore holds
  std::string value{};                     // an election's leader: its value; else empty

  friend bool operator==(const SnapshotHolder&, const SnapshotHolder&) = default;
};

// A lock-delay running at the clean shutdown.
struct SnapshotDelay {
  std::string key;
  std::uint64_t left_ms = 0;  // how much of it was left; restored in full

  friend bool operator==(const SnapshotDelay&, const SnapshotDelay&) = default;
};

struct TableSnapshot {
  StateRecord state;  // the state file's record when written
  std::vector<SnapshotHolder> holders;
  std::vector<SnapshotDelay> delays;

  friend bool operator==(const TableSnapshot&, const TableSnapshot&) = default;
};

inline constexpr std::string_view kTableMagic = "WARDEN-TABLE";
inline constexpr std::uint32_t kTableFormatVersion = 1;
// Larger files are not read: damaged (2,000,000 keys of the longest names take ~1.3 GB).
inline constexpr std::uint64_t kMaxTableSnapshotBytes = std::uint64_t{1} << 31;

// The file's bytes as laid out above.
std::vector<std::byte> encode_table_snapshot(const TableSnapshot& snapshot);

// Parses and checks a snapshot. `file` names its source in error messages. Throws
// Error(internal) for a truncated, oversized, corrupted or inconsistent file (the message
// names the defect), Error(invalid_argument) for another magic or format version.
TableSnapshot decode_table_snapshot(std::span<const std::byte> bytes, std::string_view file);

class TableSnapshotFile {
 public:
  static constexpr std::string_view kFileName = "table";
  static constexpr std::string_view kTempName = "table.tmp";
  static constexpr std::string_view kDamagedName = "table.damaged";

  // Makes `snapshot` durable as `<dir>/table`: writes table.tmp, fsyncs it, renames it,
  // fsyncs the directory. A crash at any step leaves no `table` or the whole new one.
  // Throws Error(unavailable) naming the step that failed (table.tmp is removed).
  static void write(const std::filesystem::path& dir, const TableSnapshot& snapshot);

  struct Taken {
    std::optional<TableSnapshot> snapshot;  // a valid snapshot of `current`: restore it
    std::string defect;                     // why a `table` found was not restored; empty otherwise
  };
  // Consumes `<dir>/table`: reads it, then deletes it (a valid one) or renames it to
  // table.damaged (anything else, kept for inspection), and fsyncs the directory before
  // returning. No file: {nullopt, ""}. A file that does not decode, or was written for
  // another state record than `current`: {nullopt, defect}. Throws Error(unavailable)
  // only when the file cannot be read or consumed durably (the caller must not start:
  // a later crash could find it again). A leftover table.tmp is removed.
  static Taken take(const std::filesystem::path& dir, const StateRecord& current);
};

}  // namespace warden::server
