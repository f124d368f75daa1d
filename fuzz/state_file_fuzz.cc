// fuzz/state_file_fuzz.cc — fuzz target for wardend's state-file decoder, decode_state
// (server/state_file.h): what wardend reads from disk at start, whatever the disk holds.
//
// The input is the file's bytes. What must hold for any bytes:
//   - decode_state returns a record or throws Error: invalid_argument for another magic
//     or format version, internal for a truncated, oversized or corrupted file; nothing
//     else escapes, and the message names the file;
//   - it accepts only exactly kStateRecordSize bytes, and then encode_state gives back
//     the input byte for byte (so no two files decode to one record);
//   - the input with its checksum recomputed (when it is the right size and version)
//     decodes, and encoding that record gives the same bytes: a record the decoder
//     rejects is rejected for its checksum, never for its values.
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "server/state_file.h"
#include "warden/error.h"

namespace warden::server {
namespace {

constexpr std::string_view kFile = "fuzz/state";

bool equal(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

void check_decode(std::span<const std::byte> bytes) {
  StateRecord record;
  try {
    record = decode_state(bytes, kFile);
  } catch (const Error& e) {
    WARDEN_FUZZ_CHECK(e.code() == Errc::invalid_argument || e.code() == Errc::internal);
    WARDEN_FUZZ_CHECK(std::string_view(e.what()).find(kFile) != std::string_view::npos);
    return;
  }
  WARDEN_FUZZ_CHECK(bytes.size() == kStateRecordSize);
  const auto encoded = encode_state(record);
  WARDEN_FUZZ_CHECK(equal(encoded, bytes));
}

// The input's own fields with the magic, version and checksum made right.
void check_repaired(std::span<const std::byte> bytes) {
  if (bytes.size() != kStateRecordSize) return;
  std::array<std::byte, kStateRecordSize> fixed{};
  std::copy(bytes.begin(), bytes.end(), fixed.begin());
  const auto header = encode_state(StateRecord{});
  std::copy_n(header.begin(), 16, fixed.begin());  // magic and version
  const std::uint32_t crc = crc32c(std::span(fixed).first(32));
  for (int i = 0; i < 4; ++i) fixed[32 + i] = static_cast<std::byte>(crc >> (8 * i));
  try {
    const StateRecord record = decode_state(fixed, kFile);
    WARDEN_FUZZ_CHECK(equal(encode_state(record), fixed));
  } catch (const Error&) {
    WARDEN_FUZZ_CHECK(!"a record with a correct header and checksum was rejected");
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
