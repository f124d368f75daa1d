// tests/server/state_test.cc — the state file and durable tokens: what survives a crash.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "dispatcher_test_support.h"
#include "server/durable_tokens.h"
#include "server/state_file.h"
#include "warden/error.h"

namespace warden::server {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using table::Time;

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "warden-state-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path state() const { return path_ / "state"; }
  fs::path temp() const { return path_ / "state.tmp"; }

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

std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// The first `n` bytes of a record: what a write cut short leaves behind.
std::vector<std::byte> prefix(std::span<const std::byte> bytes, std::size_t n) {
  return {bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)};
}

// The record on disk, read independently of any open StateFile.
StateRecord on_disk(const TempDir& dir) {
  return decode_state(read_bytes(dir.state()), dir.state().string());
}

// Runs `f`, expects a warden::Error with `code` whose message holds every `part`.
void expect_error(const std::function<void()>& f, Errc code,
                  std::initializer_list<std::string_view> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (std::string_view part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << e.what() << "' lacks '" << part << "'";
    }
  }
}

DurableTokens open_tokens(const TempDir& dir, std::uint64_t block = 10'000, Time started = at(0)) {
  return DurableTokens(StateFile::open(dir.path()), started, {.block = block});
}

// ---------------------------------------------------------------------------------------
// Encoding

TEST(StateRecordTest, Crc32cMatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c(as_bytes("123456789")), 0xE3069283u);
  const std::vector<std::byte> zeros(32, std::byte{0});
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);  // RFC 3720, B.4
  const std::vector<std::byte> ones(32, std::byte{0xFF});
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
}

TEST(StateRecordTest, LayoutIsFixedSizeLittleEndian) {
  const auto bytes = encode_state({.reserved_upto = 0x0102030405060708, .max_hold_ms = 30'000});
  ASSERT_EQ(bytes.size(), 36u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 12), "WARDEN-STATE");
  EXPECT_EQ(bytes[12], std::byte{1});  // version 1
  EXPECT_EQ(bytes[15], std::byte{0});
  EXPECT_EQ(bytes[16], std::byte{0x08});  // reserved_upto, low byte first
  EXPECT_EQ(bytes[23], std::byte{0x01});
  EXPECT_EQ(bytes[24], std::byte{0x30});  // 30000 = 0x7530
  EXPECT_EQ(bytes[25], std::byte{0x75});
  EXPECT_EQ(decode_state(bytes, "x"), (StateRecord{0x0102030405060708, 30'000}));
}

// ---------------------------------------------------------------------------------------
// Tokens

TEST(DurableTokensTest, FreshDirectoryStartsAtOne) {
  TempDir dir;
  const fs::path data = dir.path() / "data";  // does not exist yet
  DurableTokens tokens(StateFile::open(data), at(0));
  EXPECT_TRUE(tokens.file().fresh());
  EXPECT_EQ(tokens.next(), 1u);
  EXPECT_EQ(tokens.next(), 2u);
  EXPECT_EQ(tokens.next(), 3u);
  EXPECT_EQ(decode_state(read_bytes(data / "state"), "state").reserved_upto, 10'000u);
}

TEST(DurableTokensTest, EmptyExistingDirectoryIsFresh) {
  TempDir dir;
  auto tokens = open_tokens(dir);
  EXPECT_TRUE(tokens.file().fresh());
  EXPECT_EQ(tokens.next(), 1u);
}

TEST(DurableTokensTest, FreshStateIsOnDiskBeforeTheFirstToken) {
  TempDir dir;
  { auto tokens = open_tokens(dir); }
  EXPECT_EQ(on_disk(dir), StateRecord{});
  auto again = open_tokens(dir);
  EXPECT_FALSE(again.file().fresh());
  EXPECT_EQ(again.next(), 1u);
}

TEST(DurableTokensTest, ReopenSkipsTheRestOfTheLastBlock) {
  TempDir dir;
  std::uint64_t highest = 0;
  {
    auto tokens = open_tokens(dir, 10);
    for (int i = 0; i < 37; ++i) highest = tokens.next();
    // Gone without any close: the destructor writes nothing, as after a crash.
  }
  EXPECT_EQ(highest, 37u);
  auto tokens = open_tokens(dir, 10);
  EXPECT_EQ(tokens.next(), 41u);  // 38..40 were reserved and are never handed out
}

TEST(DurableTokensTest, TokensNeverGoBackAfterKill9MidBlock) {
  TempDir dir;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    try {
      auto tokens = open_tokens(dir, 10);
      for (int i = 0; i < 25; ++i) {
        const std::uint64_t t = tokens.next();
        if (::write(fds[1], &t, sizeof t) != sizeof t) ::_exit(3);
      }
      ::raise(SIGKILL);  // mid-block, with the state file still open and locked
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(4);
  }
  ::close(fds[1]);
  std::vector<std::uint64_t> seen;
  std::uint64_t t = 0;
  while (::read(fds[0], &t, sizeof t) == sizeof t) seen.push_back(t);
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  ASSERT_EQ(seen.size(), 25u);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]);

  auto tokens = open_tokens(dir, 10);
  const std::uint64_t next = tokens.next();
  EXPECT_GT(next, seen.back());
  EXPECT_EQ(next, 31u);
}

TEST(DurableTokensTest, ReservesOncePerBlock) {
  TempDir dir;
  auto tokens = open_tokens(dir, 100);
  const std::uint64_t before = tokens.file().stores();  // the fresh record
  EXPECT_EQ(before, 1u);
  for (int i = 0; i < 1000; ++i) tokens.next();
  EXPECT_EQ(tokens.file().stores() - before, 10u);
  EXPECT_EQ(on_disk(dir).reserved_upto, 1000u);
  tokens.next();
  EXPECT_EQ(tokens.file().stores() - before, 11u);
  EXPECT_EQ(on_disk(dir).reserved_upto, 1100u);
}

TEST(DurableTokensTest, NoTokenIsAboveTheReservationOnDisk) {
  TempDir dir;
  auto tokens = open_tokens(dir, 3);
  for (int i = 0; i < 20; ++i) {
    const std::uint64_t t = tokens.next();
    EXPECT_LE(t, on_disk(dir).reserved_upto) << "token " << t;
  }
}

TEST(DurableTokensTest, ZeroBlockIsRejected) {
  TempDir dir;
  expect_error([&] { open_tokens(dir, 0); }, Errc::invalid_argument, {"block"});
}

TEST(DurableTokensTest, ExhaustedSequenceIsAnErrorNotAWrap) {
  TempDir dir;
  write_bytes(dir.state(), encode_state({.reserved_upto = kMax - 1, .max_hold_ms = 0}));
  auto tokens = open_tokens(dir);
  EXPECT_EQ(tokens.next(), kMax);
  EXPECT_EQ(on_disk(dir).reserved_upto, kMax);
  expect_error([&] { tokens.next(); }, Errc::internal, {"exhausted"});
}

// ---------------------------------------------------------------------------------------
// Failing disks: never hand out an unpersisted token

TEST(DurableTokensTest, FailedReservationThrowsAndHandsOutNothing) {
  TempDir dir;
  auto tokens = open_tokens(dir, 5);
  for (int i = 0; i < 5; ++i) tokens.next();
  // A directory where the temporary file goes makes the update fail, even for root.
  fs::create_directory(dir.temp());
  expect_error([&] { tokens.next(); }, Errc::unavailable, {dir.path().string(), "state.tmp"});
  expect_error([&] { tokens.next(); }, Errc::unavailable, {});
  EXPECT_EQ(tokens.last(), 5u);
  EXPECT_EQ(on_disk(dir).reserved_upto, 5u);

  fs::remove(dir.temp());  // the disk recovers: the same call succeeds
  EXPECT_EQ(tokens.next(), 6u);
  EXPECT_EQ(on_disk(dir).reserved_upto, 10u);
}

// The uid of "nobody" on Debian: a user permission bits apply to.
constexpr uid_t kNobody = 65534;

TEST(DurableTokensTest, ReadOnlyDirectoryMakesNextThrow) {
  TempDir dir;
  auto tokens = open_tokens(dir, 5);
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  {
    // Permission bits do not stop root, so as root this thread's file accesses are
    // checked as "nobody" (setfsuid: this thread's filesystem uid only) while the
    // writes are tried; the test then runs whoever runs it.
    const bool as_root = ::geteuid() == 0;
    if (as_root) ::setfsuid(kNobody);
    const fs::path probe = dir.path() / "probe";
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
    }
    expect_error([&] { tokens.next(); }, Errc::unavailable, {"state.tmp"});
    expect_error([&] { tokens.note_hold(milliseconds(60'000)); }, Errc::unavailable, {});
    if (as_root) ::setfsuid(0);
    ASSERT_LT(fd, 0) << "the directory was writable: the test tested nothing";
  }
  EXPECT_EQ(tokens.last(), 0u);
  EXPECT_EQ(tokens.durable(), StateRecord{});
  EXPECT_EQ(on_disk(dir), StateRecord{});
}

// ---------------------------------------------------------------------------------------
// Damaged or missing state: never a silent reset

TEST(StateFileTest, EveryFlippedBitIsDetected) {
  TempDir dir;
  {
    auto tokens = open_tokens(dir);
    tokens.next();
    tokens.note_hold(milliseconds(30'000));
  }
  const auto good = read_bytes(dir.state());
  ASSERT_EQ(good.size(), kStateRecordSize);
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto bad = good;
      bad[i] ^= static_cast<std::byte>(1 << bit);
      write_bytes(dir.state(), bad);
      try {
        StateFile::open(dir.path());
        ADD_FAILURE() << "flipped bit " << bit << " of byte " << i << " went unnoticed";
      } catch (const Error& e) {
        EXPECT_TRUE(e.code() == Errc::internal || e.code() == Errc::invalid_argument);
        EXPECT_NE(std::string(e.what()).find(dir.state().string()), std::string::npos);
      }
      EXPECT_EQ(read_bytes(dir.state()), bad) << "open must not rewrite a damaged file";
    }
  }
}

TEST(StateFileTest, CorruptedByteIsAChecksumError) {
  TempDir dir;
  {
    auto tokens = open_tokens(dir);
    tokens.next();
  }
  auto bytes = read_bytes(dir.state());
  bytes[20] ^= std::byte{0x40};  // inside reserved_upto
  write_bytes(dir.state(), bytes);
  expect_error([&] { StateFile::open(dir.path()); }, Errc::internal,
               {dir.state().string(), "damaged", "checksum"});
}

TEST(StateFileTest, TruncatedFileIsAnError) {
  TempDir dir;
  {
    auto tokens = open_tokens(dir);
    tokens.next();
  }
  const auto good = read_bytes(dir.state());
  for (std::size_t n = 0; n < good.size(); ++n) {
    write_bytes(dir.state(), std::span(good).first(n));
    expect_error([&] { StateFile::open(dir.path()); }, Errc::internal,
                 {dir.state().string(), "truncated"});
  }
}

TEST(StateFileTest, TrailingBytesAreAnError) {
  TempDir dir;
  const auto record = encode_state({7, 8});
  std::vector<std::byte> bytes(record.begin(), record.end());
  bytes.push_back(std::byte{0});
  write_bytes(dir.state(), bytes);
  expect_error([&] { StateFile::open(dir.path()); }, Errc::internal, {"37 bytes, expected 36"});
}

TEST(StateFileTest, WrongMagicIsAnError) {
  TempDir dir;
  auto bytes = encode_state({7, 8});
  bytes[0] = std::byte{'X'};
  write_bytes(dir.state(), bytes);
  expect_error([&] { StateFile::open(dir.path()); }, Errc::invalid_argument,
               {dir.state().string(), "not a wardend state file"});
  write_bytes(dir.state(), as_bytes("hello, world\n"));
  expect_error([&] { StateFile::open(dir.path()); }, Errc::invalid_argument,
               {"not a wardend state file"});
}

TEST(StateFileTest, WrongVersionIsAnError) {
  TempDir dir;
  auto bytes = encode_state({7, 8});
  bytes[12] = std::byte{2};
  const std::uint32_t crc = crc32c(std::span(bytes).first(32));
  for (int i = 0; i < 4; ++i) bytes[32 + i] = static_cast<std::byte>(crc >> (8 * i));
  write_bytes(dir.state(), bytes);
  expect_error([&] { StateFile::open(dir.path()); }, Errc::invalid_argument,
               {dir.state().string(), "format version 2", "reads only version 1"});
}

TEST(StateFileTest, OtherFilesButNoStateIsRefused) {
  TempDir dir;
  write_bytes(dir.path() / "wardend.log", as_bytes("old log\n"));
  expect_error([&] { StateFile::open(dir.path()); }, Errc::invalid_argument,
               {dir.path().string(), "'wardend.log'", "no 'state'", "--reset-state"});
  EXPECT_FALSE(fs::exists(dir.state())) << "a refused open must change nothing";
}

TEST(StateFileTest, AllowFreshOverridesMissingState) {
  TempDir dir;
  write_bytes(dir.path() / "wardend.log", as_bytes("old log\n"));
  DurableTokens tokens(StateFile::open(dir.path(), {.allow_fresh = true}), at(0));
  EXPECT_TRUE(tokens.file().fresh());
  EXPECT_EQ(tokens.next(), 1u);
  EXPECT_EQ(tokens.embargo_until(), at(0));
  EXPECT_TRUE(fs::exists(dir.state()));
}

TEST(StateFileTest, AllowFreshDoesNotOverrideADamagedState) {
  TempDir dir;
  write_bytes(dir.state(), prefix(encode_state({7, 8}), 20));
  expect_error([&] { StateFile::open(dir.path(), {.allow_fresh = true}); }, Errc::internal,
               {"truncated"});
}

TEST(StateFileTest, LeftoverTempFileIsIgnored) {
  TempDir dir;
  {
    auto tokens = open_tokens(dir, 10);
    for (int i = 0; i < 15; ++i) tokens.next();
  }
  // A crash in the middle of the next update: half a record, with larger values.
  write_bytes(dir.temp(), prefix(encode_state({1'000'000, 99}), 20));
  auto tokens = open_tokens(dir, 10);
  EXPECT_EQ(tokens.durable(), (StateRecord{20, 0}));
  EXPECT_EQ(tokens.next(), 21u);
  EXPECT_FALSE(fs::exists(dir.temp())) << "the next update replaces it";
  EXPECT_EQ(on_disk(dir).reserved_upto, 30u);
}

TEST(StateFileTest, TempFileWithoutStateIsRefused) {
  // The very first update was cut short — or `state` was deleted after a later one was.
  // Which is unknown, so the conservative answer applies.
  TempDir dir;
  write_bytes(dir.temp(), prefix(encode_state({10'000, 0}), 20));
  expect_error([&] { StateFile::open(dir.path()); }, Errc::invalid_argument, {"'state.tmp'"});
  EXPECT_NO_THROW(StateFile::open(dir.path(), {.allow_fresh = true}));
}

TEST(StateFileTest, DirectoryIsLockedWhileOpen) {
  TempDir dir;
  auto first = StateFile::open(dir.path());
  expect_error([&] { StateFile::open(dir.path()); }, Errc::unavailable, {"in use"});
  first = StateFile::open(dir.path() / "other");  // moving over `first` unlocks it
  EXPECT_NO_THROW(StateFile::open(dir.path()));
}

TEST(StateFileTest, PathThatIsAFileIsAnError) {
  TempDir dir;
  write_bytes(dir.path() / "plain", as_bytes("x"));
  EXPECT_THROW(StateFile::open(dir.path() / "plain"), Error);
}

TEST(StateFileTest, TrailingSlashNamesTheSameDirectory) {
  TempDir dir;
  {
    auto tokens = open_tokens(dir);
    tokens.next();
  }
  auto file = StateFile::open(dir.path().string() + "/");
  EXPECT_EQ(file.record().reserved_upto, 10'000u);
}

TEST(StateFileTest, StoreRefusesToLowerEitherField) {
  TempDir dir;
  auto file = StateFile::open(dir.path());
  file.store({100, 50});
  expect_error([&] { file.store({99, 50}); }, Errc::internal, {"lower"});
  expect_error([&] { file.store({100, 49}); }, Errc::internal, {"lower"});
  EXPECT_EQ(on_disk(dir), (StateRecord{100, 50}));
  EXPECT_EQ(file.record(), (StateRecord{100, 50}));
}

// ---------------------------------------------------------------------------------------
// max_hold and the restart embargo

TEST(DurableTokensTest, NoteHoldPersistsBeforeReturning) {
  TempDir dir;
  auto tokens = open_tokens(dir);
  const auto stores = tokens.file().stores();
  tokens.note_hold(milliseconds(5'000));
  EXPECT_EQ(on_disk(dir).max_hold_ms, 5'000u);
  tokens.note_hold(milliseconds(3'000));  // shorter: nothing to do
  tokens.note_hold(milliseconds(5'000));
  tokens.note_hold(milliseconds(0));
  tokens.note_hold(milliseconds(-1));
  EXPECT_EQ(tokens.file().stores(), stores + 1);
  tokens.note_hold(milliseconds(7'000));
  EXPECT_EQ(on_disk(dir).max_hold_ms, 7'000u);
  EXPECT_EQ(tokens.file().stores(), stores + 2);
}

TEST(DurableTokensTest, NoteHoldAndReservationsKeepEachOther) {
  TempDir dir;
  auto tokens = open_tokens(dir, 10);
  tokens.next();
  tokens.note_hold(milliseconds(40'000));
  for (int i = 0; i < 10; ++i) tokens.next();
  EXPECT_EQ(on_disk(dir), (StateRecord{20, 40'000}));
}

TEST(DurableTokensTest, FreshStateHasNoEmbargo) {
  TempDir dir;
  auto tokens = open_tokens(dir, 10'000, at(500));
  EXPECT_EQ(tokens.embargo_until(), at(500));
  EXPECT_FALSE(tokens.starting_up(at(500)));
  EXPECT_EQ(tokens.embargo_left(at(500)), milliseconds(0));
}

TEST(DurableTokensTest, EmbargoCountsFromStartForThePersistedMaxHold) {
  TempDir dir;
  {
    auto tokens = open_tokens(dir);
    tokens.note_hold(milliseconds(30'000 + 15'000));  // ttl + lock_delay
    tokens.next();
  }
  auto tokens = open_tokens(dir, 10'000, at(1'000));
  EXPECT_EQ(tokens.embargo_until(), at(46'000));
  EXPECT_TRUE(tokens.starting_up(at(1'000)));
  EXPECT_TRUE(tokens.starting_up(at(45'999)));
  EXPECT_FALSE(tokens.starting_up(at(46'000)));
  EXPECT_EQ(tokens.embargo_left(at(1'000)), milliseconds(45'000));
  EXPECT_EQ(tokens.embargo_left(at(45'999) + std::chrono::microseconds(500)), milliseconds(1));
  EXPECT_EQ(tokens.embargo_left(at(50'000)), milliseconds(0));

  // Longer holds granted after the restart do not move this restart's embargo.
  tokens.note_hold(milliseconds(100'000));
  EXPECT_EQ(tokens.embargo_until(), at(46'000));
  // Tokens are safe during the embargo.
  EXPECT_EQ(tokens.next(), 10'001u);
}

TEST(DurableTokensTest, HugeMaxHoldSaturatesInsteadOfWrapping) {
  TempDir dir;
  write_bytes(dir.state(), encode_state({.reserved_upto = 5, .max_hold_ms = kMax}));
  auto tokens = open_tokens(dir);
  EXPECT_EQ(tokens.embargo_until(), Time::max());
  EXPECT_TRUE(tokens.starting_up(at(1'000'000'000)));
}

}  // namespace
}  // namespace warden::server
