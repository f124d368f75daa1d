// fuzz/table_snapshot_fuzz.cc — fuzz target for wardend's table-snapshot decoder,
// decode_table_snapshot (server/table_snapshot.h): what a restart reads from the data dir
// after a clean shutdown, whatever the disk holds.
//
// The input is the file's bytes. What must hold for any bytes:
//   - decode_table_snapshot returns a snapshot or throws Error: invalid_argument for
//     another magic or format version, internal for anything damaged; nothing else
//     escapes, and the message names the file;
//   - what it accepts, encode_table_snapshot gives back byte for byte (the encoding is
//     canonical, so no two files mean one table);
//   - what it accepts can be restored whole: every holder into a LockTable whose token
//     source is at the snapshot's reserved_upto, every lock-delay too (a decoded snapshot
//     never leaves a half-restored table);
//   - the input with its checksum recomputed is rejected, if at all, for what it says,
//     never for its checksum.
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "server/table_snapshot.h"
#include "table/lock_table.h"
#include "warden/error.h"

namespace warden::server {
namespace {

constexpr std::string_view kFile = "fuzz/table";

void check_restores(const TableSnapshot& s) {
  table::CountingTokenSource tokens(s.state.reserved_upto);
  table::LockTable table(&tokens);
  const table::Time now = table::Time{} + std::chrono::hours(1);
  for (const SnapshotHolder& h : s.holders) {
    table::Request r;
    r.key = h.key;
    r.mode = h.mode;
    r.ttl = std::chrono::milliseconds(static_cast<std::int64_t>(h.ttl_ms));
    r.lock_delay = std::chrono::milliseconds(static_cast<std::int64_t>(h.lock_delay_ms));
    WARDEN_FUZZ_CHECK(table.restore(r, h.token, now).has_value());
  }
  for (const SnapshotDelay& d : s.delays) {
    WARDEN_FUZZ_CHECK(table.restore_delay(
        d.key, now + std::chrono::milliseconds(static_cast<std::int64_t>(d.left_ms)), now));
  }
  WARDEN_FUZZ_CHECK(table.stats().holders == s.holders.size());
}

void check_decode(std::span<const std::byte> bytes) {
  TableSnapshot snapshot;
  try {
    snapshot = decode_table_snapshot(bytes, kFile);
  } catch (const Error& e) {
    WARDEN_FUZZ_CHECK(e.code() == Errc::invalid_argument || e.code() == Errc::internal);
    WARDEN_FUZZ_CHECK(std::string_view(e.what()).find(kFile) != std::string_view::npos);
    return;
  }
  const auto encoded = encode_table_snapshot(snapshot);
  WARDEN_FUZZ_CHECK(encoded.size() == bytes.size() &&
                    std::equal(encoded.begin(), encoded.end(), bytes.begin()));
  check_restores(snapshot);
}

// The input with its magic, version and checksum made right.
void check_repaired(std::span<const std::byte> bytes) {
  if (bytes.size() < 44) return;
  std::vector<std::byte> fixed(bytes.begin(), bytes.end());
  const auto header = encode_table_snapshot(TableSnapshot{});
  std::copy_n(header.begin(), 16, fixed.begin());  // magic and version
  const std::uint32_t crc = crc32c(std::span(fixed).first(fixed.size() - 4));
  for (int i = 0; i < 4; ++i) fixed[fixed.size() - 4 + i] = static_cast<std::byte>(crc >> (8 * i));
  try {
    const TableSnapshot s = decode_table_snapshot(fixed, kFile);
    const auto encoded = encode_table_snapshot(s);
    WARDEN_FUZZ_CHECK(encoded == fixed);
  } catch (const Error& e) {
    // Judged by what the message says first, right after the file's name: a key quoted
    // later in it may spell anything, the checksum failure's words included.
    const std::string_view what = e.what();
    const std::string_view damaged = "' is damaged: ";
    const auto at = what.find(damaged);
    WARDEN_FUZZ_CHECK(at == std::string_view::npos ||
                      what.substr(at + damaged.size()).rfind("its CRC-32C checksum", 0) != 0);
  }
}

}  // namespace
}  // namespace warden::server

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warden::server;
  // A copy of exactly `size` bytes, so reading past the input is a heap overflow that
  // AddressSanitizer reports.
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                     reinterpret_cast<const std::byte*>(data) + size);
  check_decode(bytes);
  check_repaired(bytes);
  return 0;
}
