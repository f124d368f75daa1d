// tests/server/table_snapshot_test.cc — the table written at a clean shutdown: its
// encoding, its checks, and that a start consumes it exactly once; what the data dir
// then means for the restart embargo (DurableState).
#include "server/table_snapshot.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "server/durable_state.h"
#include "warden/election.h"
#include "warden/error.h"

namespace warden::server {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "warden-table-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path table() const { return path_ / "table"; }

 private:
  fs::path path_;
};

std::vector<std::byte> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) out[i] = static_cast<std::byte>(chars[i]);
  return out;
}

void write_bytes(const fs::path& p, std::span<const std::byte> bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  for (std::byte b : bytes) out.put(static_cast<char>(b));
}

// The CRC-32C at the end made right again, so a test can reach the checks behind it.
std::vector<std::byte> with_fixed_crc(std::vector<std::byte> bytes) {
  const std::uint32_t crc = crc32c(std::span(bytes).first(bytes.size() - 4));
  for (int i = 0; i < 4; ++i) bytes[bytes.size() - 4 + i] = static_cast<std::byte>(crc >> (8 * i));
  return bytes;
}

constexpr StateRecord kState{.reserved_upto = 20'000, .max_hold_ms = 45'000};

TableSnapshot sample() {
  TableSnapshot s;
  s.state = kState;
  s.holders.push_back(SnapshotHolder{"jobs/nightly", Mode::exclusive, 17, {}, 30'000, 15'000});
  s.holders.push_back(SnapshotHolder{"cfg/read", Mode::shared, 18, {}, 5'000, 0});
  s.holders.push_back(SnapshotHolder{"cfg/read", Mode::shared, 19, {}, 10'000, 0});
  // A semaphore of 4 permits, all of them held by two grants.
  s.holders.push_back(SnapshotHolder{"media/enc", Mode::shared, 20, {}, 8'000, 0, 4, 1});
  s.holders.push_back(SnapshotHolder{"media/enc", Mode::shared, 21, {}, 8'000, 0, 4, 3});
  // An election's leader, with its value (any bytes).
  s.holders.push_back(SnapshotHolder{"billing/leader", Mode::exclusive, 22, {}, 8'000, 0, 0, 0,
                                     std::string("node-a\0:8080", 12)});
  for (std::size_t i = 0; i < s.holders.size(); ++i) {
    for (std::size_t b = 0; b < 16; ++b) {
      s.holders[i].secret[b] = static_cast<unsigned char>(0xA0 + 16 * i + b);
    }
  }
  s.delays.push_back(SnapshotDelay{"jobs/crashed", 1'234});
  return s;
}

// decode_table_snapshot's error for `bytes`, or "" if it decodes.
std::string decode_error(std::span<const std::byte> bytes, Errc* code = nullptr) {
  try {
    decode_table_snapshot(bytes, "dir/table");
    return "";
  } catch (const Error& e) {
    if (code != nullptr) *code = e.code();
    return e.what();
  }
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------------
// Encoding and its checks

TEST(TableSnapshotTest, RoundTripsEveryField) {
  const TableSnapshot s = sample();
  const auto bytes = encode_table_snapshot(s);
  EXPECT_EQ(decode_table_snapshot(bytes, "t"), s);
  EXPECT_EQ(encode_table_snapshot(decode_table_snapshot(bytes, "t")), bytes);
}

TEST(TableSnapshotTest, EmptyTableRoundTrips) {
  TableSnapshot s;
  s.state = kState;
  const auto bytes = encode_table_snapshot(s);
  EXPECT_EQ(bytes.size(), 44u);  // the header and the checksum
  EXPECT_EQ(decode_table_snapshot(bytes, "t"), s);
}

TEST(TableSnapshotTest, EveryTruncationIsDamage) {
  const auto bytes = encode_table_snapshot(sample());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    Errc code{};
    const std::string error = decode_error(std::span(bytes).first(n), &code);
    ASSERT_FALSE(error.empty()) << n;
    EXPECT_EQ(code, Errc::internal) << n << ": " << error;
    EXPECT_TRUE(contains(error, "dir/table")) << error;
    EXPECT_TRUE(contains(error, "damaged")) << error;
  }
}

TEST(TableSnapshotTest, AppendedBytesAreDamage) {
  auto bytes = encode_table_snapshot(sample());
  bytes.push_back(std::byte{0});
  EXPECT_TRUE(contains(decode_error(bytes), "checksum")) << decode_error(bytes);
  // Even with a checksum that covers them: they follow the last record.
  bytes.insert(bytes.end(), 3, std::byte{0});
  EXPECT_TRUE(contains(decode_error(with_fixed_crc(bytes)), "follow its last record"))
      << decode_error(with_fixed_crc(bytes));
}

TEST(TableSnapshotTest, EveryFlippedBitIsDetected) {
  const auto bytes = encode_table_snapshot(sample());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto damaged = bytes;
      damaged[i] ^= static_cast<std::byte>(1 << bit);
      ASSERT_FALSE(decode_error(damaged).empty()) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(TableSnapshotTest, AnotherMagicOrVersionIsNotOurs) {
  auto bytes = encode_table_snapshot(sample());
  auto other = bytes;
  other[0] = std::byte{'X'};
  Errc code{};
  EXPECT_TRUE(contains(decode_error(other, &code), "not a wardend table snapshot"));
  EXPECT_EQ(code, Errc::invalid_argument);
  auto version = bytes;
  version[12] = std::byte{2};
  EXPECT_TRUE(contains(decode_error(with_fixed_crc(version), &code), "format version 2"));
  EXPECT_EQ(code, Errc::invalid_argument);
}

TEST(TableSnapshotTest, CountsTheFileCannotHoldAreDamageNotAnAllocation) {
  auto bytes = encode_table_snapshot(sample());
  for (int i = 0; i < 4; ++i) bytes[32 + i] = std::byte{0xFF};  // 4 billion holders
  EXPECT_TRUE(contains(decode_error(with_fixed_crc(bytes)), "more than its size allows"));
}

// A snapshot whose checksum is right but whose contents could not have been a table
// of this state: each is refused, naming what is wrong.
TEST(TableSnapshotTest, InconsistentContentsAreDamage) {
  const auto refused = [](const TableSnapshot& s, std::string_view why) {
    const std::string error = decode_error(encode_table_snapshot(s));
    EXPECT_TRUE(contains(error, why)) << "'" << error << "' lacks '" << why << "'";
  };
  auto s = sample();
  s.holders[1].mode = Mode::exclusive;  // beside a shared holder of cfg/read
  refused(s, "an exclusive grant beside another grant");
  s = sample();
  s.holders[2].token = 17;
  refused(s, "token 17 is held twice");
  s = sample();
  s.holders[0].token = kState.reserved_upto + 1;
  refused(s, "outside 1..20000");
  s = sample();
  s.holders[0].token = 0;
  refused(s, "outside 1..20000");
  s = sample();
  s.holders[0].ttl_ms = 40'000;  // + 15,000 lock-delay > max_hold 45,000
  refused(s, "exceeds the durable max_hold");
  s = sample();
  s.holders[0].ttl_ms = 5;
  refused(s, "ttl 5ms is outside");
  s = sample();
  s.holders[0].lock_delay_ms = std::numeric_limits<std::uint64_t>::max();
  refused(s, "lock_delay");
  s = sample();
  s.holders[0].key = "no-slash";
  refused(s, "not group/name");
  s = sample();
  s.holders[0].key = "bad group/x";
  refused(s, "invalid key");
  s = sample();
  s.delays[0].left_ms = 0;
  refused(s, "0 ms left");
  s = sample();
  s.delays.push_back(s.delays[0]);
  refused(s, "a second lock-delay on one key");
  s = sample();
  s.holders[4].permits = 4;  // 1 + 4 of 4
  refused(s, "more permits held than the semaphore has");
  s = sample();
  s.holders[4].capacity = 5;
  s.holders[4].permits = 1;
  refused(s, "a semaphore of another number of permits");
  s = sample();
  s.holders[2].capacity = 2;  // a semaphore's grant beside cfg/read's shared lock grant
  s.holders[2].permits = 1;
  refused(s, "a semaphore of another number of permits, or a lock's");
  s = sample();
  s.holders[3].permits = 5;
  refused(s, "5 permits of a semaphore of 4");
  s = sample();
  s.holders[3].permits = 0;
  refused(s, "0 permits of a semaphore of 4");
  s = sample();
  s.holders[5].value = std::string(kMaxLeaderValueBytes + 1, 'v');
  refused(s, "a leader with a value of 4097 bytes");
  auto bytes = encode_table_snapshot(sample());
  bytes[40] = std::byte{7};  // the first holder's mode
  EXPECT_TRUE(contains(decode_error(with_fixed_crc(bytes)), "has mode 7"));
}

// ---------------------------------------------------------------------------------------
// The file: written atomically, consumed once

TEST(TableSnapshotFileTest, WrittenSnapshotIsTakenOnceAndThenGone) {
  TempDir dir;
  TableSnapshotFile::write(dir.path(), sample());
  EXPECT_TRUE(fs::exists(dir.table()));
  EXPECT_FALSE(fs::exists(dir.path() / "table.tmp"));

  const auto taken = TableSnapshotFile::take(dir.path(), kState);
  ASSERT_TRUE(taken.snapshot.has_value()) << taken.defect;
  EXPECT_EQ(*taken.snapshot, sample());
  EXPECT_EQ(taken.defect, "");
  // Consumed: a crash after this start cannot restore it again.
  EXPECT_FALSE(fs::exists(dir.table()));
  const auto again = TableSnapshotFile::take(dir.path(), kState);
  EXPECT_FALSE(again.snapshot.has_value());
  EXPECT_EQ(again.defect, "");
}

TEST(TableSnapshotFileTest, NoFileIsNoSnapshotAndNoDefect) {
  TempDir dir;
  const auto taken = TableSnapshotFile::take(dir.path(), kState);
  EXPECT_FALSE(taken.snapshot.has_value());
  EXPECT_EQ(taken.defect, "");
}

TEST(TableSnapshotFileTest, TornFileIsADefectAndIsMovedAside) {
  TempDir dir;
  const auto bytes = encode_table_snapshot(sample());
  write_bytes(dir.table(), std::span(bytes).first(bytes.size() / 2));
  const auto taken = TableSnapshotFile::take(dir.path(), kState);
  EXPECT_FALSE(taken.snapshot.has_value());
  EXPECT_TRUE(contains(taken.defect, dir.table().string())) << taken.defect;
  EXPECT_TRUE(contains(taken.defect, "damaged")) << taken.defect;
  EXPECT_FALSE(fs::exists(dir.table()));
  EXPECT_EQ(read_bytes(dir.path() / "table.damaged").size(), bytes.size() / 2);
}

TEST(TableSnapshotFileTest, CorruptedFileIsADefect) {
  TempDir dir;
  auto bytes = encode_table_snapshot(sample());
  bytes[50] ^= std::byte{0x10};
  write_bytes(dir.table(), bytes);
  const auto taken = TableSnapshotFile::take(dir.path(), kState);
  EXPECT_FALSE(taken.snapshot.has_value());
  EXPECT_TRUE(contains(taken.defect, "checksum")) << taken.defect;
  EXPECT_FALSE(fs::exists(dir.table()));
}

TEST(TableSnapshotFileTest, OversizedFileIsADefect) {
  TempDir dir;
  auto bytes = encode_table_snapshot(sample());
  bytes.resize(bytes.size() + 100'000, std::byte{0x55});
  write_bytes(dir.table(), bytes);
  const auto taken = TableSnapshotFile::take(dir.path(), kState);
  EXPECT_FALSE(taken.snapshot.has_value());
  EXPECT_TRUE(contains(taken.defect, "damaged")) << taken.defect;
}

TEST(TableSnapshotFileTest, SnapshotOfAnotherStateIsNotRestored) {
  TempDir dir;
  TableSnapshotFile::write(dir.path(), sample());
  const auto taken = TableSnapshotFile::take(
      dir.path(), StateRecord{kState.reserved_upto + 10'000, kState.max_hold_ms});
  EXPECT_FALSE(taken.snapshot.has_value());
  EXPECT_TRUE(contains(taken.defect, "was written for another state")) << taken.defect;
  EXPECT_FALSE(fs::exists(dir.table()));
}

TEST(TableSnapshotFileTest, LeftoverTempFileIsNoSnapshotAndIsRemoved) {
  TempDir dir;
  write_bytes(dir.path() / "table.tmp", encode_table_snapshot(sample()));
  const auto taken = TableSnapshotFile::take(dir.path(), kState);
  EXPECT_FALSE(taken.snapshot.has_value());
  EXPECT_EQ(taken.defect, "");
  EXPECT_FALSE(fs::exists(dir.path() / "table.tmp"));
}

TEST(TableSnapshotFileTest, WriteToAMissingDirectoryIsUnavailable) {
  TempDir dir;
  try {
    TableSnapshotFile::write(dir.path() / "gone", sample());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unavailable);
    EXPECT_TRUE(contains(e.what(), "gone")) << e.what();
  }
}

// ---------------------------------------------------------------------------------------
// DurableState: which start is clean, and what that means for the embargo

// A data dir whose state says: longest hold 60 s, some tokens handed out.
void used_state(const TempDir& dir) {
  DurableState state(dir.path().string(), false);
  state.note_hold(std::chrono::milliseconds(60'000));
  state.tokens().next();
}

TEST(DurableStateTest, CleanShutdownRestartsWithoutEmbargoAndKeepsTokensMonotonic) {
  TempDir dir;
  used_state(dir);
  std::uint64_t held_token = 0;
  {
    DurableState state(dir.path().string(), false);
    held_token = state.tokens().next();
    TableSnapshot table;
    table.holders.push_back(SnapshotHolder{"g/n", Mode::exclusive, held_token, {}, 30'000, 0});
    state.save_table(table);
  }
  DurableState state(dir.path().string(), false);
  EXPECT_EQ(state.embargo_ms(Clock::now()), 0u);
  EXPECT_EQ(state.snapshot_defect(), "");
  const auto restored = state.take_restored();
  ASSERT_TRUE(restored.has_value());
  ASSERT_EQ(restored->holders.size(), 1u);
  EXPECT_EQ(restored->holders[0].token, held_token);
  EXPECT_FALSE(state.take_restored().has_value());  // handed out once
  EXPECT_GT(state.tokens().next(), held_token);
  EXPECT_FALSE(fs::exists(dir.table()));
}

TEST(DurableStateTest, StartWithoutSnapshotKeepsTheCrashRule) {
  TempDir dir;
  used_state(dir);
  DurableState state(dir.path().string(), false);
  EXPECT_GT(state.embargo_ms(Clock::now()), 50'000u);
  EXPECT_FALSE(state.take_restored().has_value());
  EXPECT_EQ(state.snapshot_defect(), "");
}

TEST(DurableStateTest, DamagedSnapshotFallsBackToTheEmbargoAndSaysWhy) {
  TempDir dir;
  used_state(dir);
  {
    DurableState state(dir.path().string(), false);
    state.save_table(TableSnapshot{});
  }
  auto bytes = read_bytes(dir.table());
  bytes[20] ^= std::byte{1};
  write_bytes(dir.table(), bytes);
  DurableState state(dir.path().string(), false);
  EXPECT_GT(state.embargo_ms(Clock::now()), 50'000u);
  EXPECT_FALSE(state.take_restored().has_value());
  EXPECT_TRUE(contains(state.snapshot_defect(), "checksum")) << state.snapshot_defect();
}

TEST(DurableStateTest, SnapshotIsConsumedSoACrashAfterACleanRestartWaitsOutTheEmbargo) {
  TempDir dir;
  used_state(dir);
  {
    DurableState state(dir.path().string(), false);
    state.save_table(TableSnapshot{});
  }
  { DurableState clean(dir.path().string(), false); }  // consumed, then "crashed"
  DurableState state(dir.path().string(), false);
  EXPECT_GT(state.embargo_ms(Clock::now()), 50'000u);
  EXPECT_FALSE(state.take_restored().has_value());
}

}  // namespace
}  // namespace warden::server
