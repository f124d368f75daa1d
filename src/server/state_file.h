// server/state_file.h — the one record wardend keeps on disk, and its atomic update.
//
// The record is what must survive a crash (kill -9, power loss) for wardend's two
// durability promises (see server/durable_tokens.h): the highest fencing token that may
// have been handed out, and the longest lease + lock-delay ever granted.
//
// On disk: `<dir>/state`, exactly kStateRecordSize bytes, little-endian:
//
//   offset  size  field
//   ------  ----  ---------------------------------------------------------------
//        0    12  magic "WARDEN-STATE" (ASCII, no terminator)
//       12     4  format version (u32) = 1
//       16     8  reserved_upto (u64): no token above this was ever handed out
//       24     8  max_hold_ms (u64): longest ttl + lock_delay ever granted
//       32     4  CRC-32C (Castagnoli) of bytes 0..31 (u32)
//
// Update (store): write `<dir>/state.tmp`, fsync it, rename it over `state`, fsync the
// directory. A crash at any step leaves either the old record or the new one under the
// name `state`, never a mix; a leftover `state.tmp` is ignored and overwritten by the
// next update.
//
// Open: the directory is created if missing and locked (flock) for the life of the
// StateFile, so two servers cannot share it and hand out the same tokens.
//
//   directory state                                 result
//   ----------------------------------------------  ------------------------------------
//   missing or empty                                fresh record {0, 0}, stored at once
//   valid `state`                                   that record
//   `state` truncated, oversized, checksum wrong    Error(internal), names file + defect
//   `state` with another magic or format version    Error(invalid_argument), likewise
//   other files but no `state`                      Error(invalid_argument): the state
//                                                   was deleted or never completed;
//                                                   fresh only with allow_fresh
//   locked by another StateFile / process           Error(unavailable)
//   I/O error (permissions, disk)                   Error(unavailable)
//
// A damaged file is never reset silently, not even with allow_fresh: the operator moves
// it aside (keeping it for inspection), and then allow_fresh starts over.
//
// Thread safety: none; one thread owns a StateFile (wardend's event loop).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace warden::server {

// The contents of one state record.
struct StateRecord {
  std::uint64_t reserved_upto = 0;  // no token above this was ever handed out
  std::uint64_t max_hold_ms = 0;    // longest ttl + lock_delay ever granted, in ms

  friend bool operator==(const StateRecord&, const StateRecord&) = default;
};

inline constexpr std::string_view kStateMagic = "WARDEN-STATE";
inline constexpr std::uint32_t kStateFormatVersion = 1;
inline constexpr std::size_t kStateRecordSize = 36;

// CRC-32C (Castagnoli, reflected, init and final xor 0xFFFFFFFF): "123456789" gives
// 0xE3069283.
std::uint32_t crc32c(std::span<const std::byte> data) noexcept;

// The record's bytes as laid out above.
std::array<std::byte, kStateRecordSize> encode_state(const StateRecord& record);

// Parses a record. `file` names its source in error messages. Throws Error(internal)
// for a truncated, oversized or corrupted record, Error(invalid_argument) for another
// magic or an unsupported format version.
StateRecord decode_state(std::span<const std::byte> bytes, std::string_view file);

struct StateFileOptions {
  // Start from a fresh record when the directory holds other files but no `state`.
  // DANGEROUS (wardend --reset-state): fencing tokens restart at 1 and no restart
  // embargo applies, so tokens of locks granted before may repeat and a lock still held
  // from before may be granted again. Does not override a damaged `state`.
  bool allow_fresh = false;
};

class StateFile {
 public:
  static constexpr std::string_view kFileName = "state";
  static constexpr std::string_view kTempName = "state.tmp";

  // Opens (creating if missing) and locks `dir`, then loads its record as the table
  // above says. A fresh record is stored before open returns, so a used directory
  // always holds a `state`. Throws warden::Error naming the directory or file.
  static StateFile open(const std::filesystem::path& dir, const StateFileOptions& options = {});

  StateFile(StateFile&& other) noexcept;
  StateFile& operator=(StateFile&& other) noexcept;
  StateFile(const StateFile&) = delete;
  StateFile& operator=(const StateFile&) = delete;
  // Unlocks the directory. Writes nothing: closing is the same as crashing.
  ~StateFile();

  // The last record made durable (loaded or stored).
  const StateRecord& record() const { return record_; }
  // true if open found no record (new or empty directory, or allow_fresh was used).
  bool fresh() const { return fresh_; }
  const std::filesystem::path& dir() const { return dir_; }

  // Makes `record` durable, replacing the current one. On success record() is `record`.
  // On failure throws Error(unavailable) and record() is unchanged (the file holds the
  // old record or, if only the final directory fsync failed, possibly the new one — either
  // is safe, since neither field ever decreases). Throws Error(internal) if a field would
  // decrease: durability depends on both only ever growing.
  void store(const StateRecord& record);

  // How many store() calls succeeded since open, the fresh record included (each is one
  // write, two fsyncs and one rename).
  std::uint64_t stores() const { return stores_; }

 private:
  StateFile(std::filesystem::path dir, int dir_fd);
  void close_dir() noexcept;

  std::filesystem::path dir_;
  int dir_fd_ = -1;  // open and flock'ed while the StateFile lives
  StateRecord record_;
  bool fresh_ = false;
  std::uint64_t stores_ = 0;
};

}  // namespace warden::server
