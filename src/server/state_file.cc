// server/state_file.cc — encoding, checksum and the write-fsync-rename-fsync update.
#include "server/state_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "server/file_io.h"
#include "warden/error.h"

namespace warden::server {
namespace {

using file_io::errno_text;
using file_io::fsync_retrying;
using file_io::get_u32;
using file_io::get_u64;
using file_io::put_u32;
using file_io::put_u64;
using file_io::quoted;
using file_io::write_all;

constexpr std::size_t kVersionOffset = 12;
constexpr std::size_t kReservedOffset = 16;
constexpr std::size_t kMaxHoldOffset = 24;
constexpr std::size_t kCrcOffset = 32;
// Anything this large is certainly not a state file; it is not read whole.
constexpr off_t kMaxReadBytes = 1 << 20;

[[noreturn]] void fail(Errc code, const std::string& message) { throw Error(code, message); }

// Makes a new directory's own entry durable in its parent.
void fsync_parent_of(const std::filesystem::path& dir) {
  std::filesystem::path parent = dir.parent_path();
  if (parent.empty()) parent = ".";
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail(Errc::unavailable, "cannot open " + quoted(parent) + ": " + errno_text(err));
  }
  const int err = fsync_retrying(fd);
  ::close(fd);
  if (err != 0) fail(Errc::unavailable, "cannot fsync " + quoted(parent) + ": " + errno_text(err));
}

// Reads a whole (small) file. Throws Error(unavailable) on I/O errors.
std::vector<std::byte> read_file(int fd, const std::filesystem::path& path) {
  return file_io::read_whole(fd, path, kMaxReadBytes, "state file",
                             "expected " + std::to_string(kStateRecordSize));
}

// Names of the directory's entries, for the "state missing" decision and its message.
std::vector<std::string> entries_of(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) fail(Errc::unavailable, "cannot list " + quoted(dir) + ": " + ec.message());
  return names;
}

std::string list_some(const std::vector<std::string>& names) {
  std::string out;
  const std::size_t shown = std::min<std::size_t>(names.size(), 3);
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

}  // namespace

std::uint32_t crc32c(std::span<const std::byte> data) noexcept {
  // Bitwise: the record is 32 bytes, so a lookup table would buy nothing.
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::byte b : data) {
    crc ^= std::to_integer<std::uint32_t>(b);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::array<std::byte, kStateRecordSize> encode_state(const StateRecord& record) {
  std::array<std::byte, kStateRecordSize> out{};
  std::memcpy(out.data(), kStateMagic.data(), kStateMagic.size());
  put_u32(out.data() + kVersionOffset, kStateFormatVersion);
  put_u64(out.data() + kReservedOffset, record.reserved_upto);
  put_u64(out.data() + kMaxHoldOffset, record.max_hold_ms);
  put_u32(out.data() + kCrcOffset, crc32c(std::span(out).first(kCrcOffset)));
  return out;
}

StateRecord decode_state(std::span<const std::byte> bytes, std::string_view file) {
  const std::string name = "state file '" + std::string(file) + "'";
  const std::string size_text =
      std::to_string(bytes.size()) + " bytes, expected " + std::to_string(kStateRecordSize);
  const std::size_t magic_seen = std::min(bytes.size(), kStateMagic.size());
  if (magic_seen > 0 && std::memcmp(bytes.data(), kStateMagic.data(), magic_seen) != 0) {
    fail(Errc::invalid_argument,
         name + " is not a wardend state file (it does not start with \"WARDEN-STATE\")");
  }
  if (bytes.size() < kReservedOffset) {
    fail(Errc::internal, name + " is damaged: truncated to " + size_text);
  }
  const bool checksum_ok = bytes.size() == kStateRecordSize &&
                           crc32c(bytes.first(kCrcOffset)) == get_u32(bytes.data() + kCrcOffset);
  const std::uint32_t version = get_u32(bytes.data() + kVersionOffset);
  if (version != kStateFormatVersion) {
    fail(Errc::invalid_argument, name + " has format version " + std::to_string(version) +
                                     ", but this wardend reads only version " +
                                     std::to_string(kStateFormatVersion) +
                                     (checksum_ok ? " (it was written by another wardend release)"
                                                  : " (a newer format, or a damaged file)"));
  }
  if (bytes.size() < kStateRecordSize) {
    fail(Errc::internal, name + " is damaged: truncated to " + size_text);
  }
  if (bytes.size() > kStateRecordSize) {
    fail(Errc::internal, name + " is damaged: it has " + size_text);
  }
  if (!checksum_ok) {
    fail(Errc::internal, name + " is damaged: its CRC-32C checksum does not match its contents");
  }
  return StateRecord{get_u64(bytes.data() + kReservedOffset),
                     get_u64(bytes.data() + kMaxHoldOffset)};
}

StateFile::StateFile(std::filesystem::path dir, int dir_fd)
    : dir_(std::move(dir)), dir_fd_(dir_fd) {}

StateFile::StateFile(StateFile&& other) noexcept
    : dir_(std::move(other.dir_)),
      dir_fd_(std::exchange(other.dir_fd_, -1)),
      record_(other.record_),
      fresh_(other.fresh_),
      stores_(other.stores_) {}

StateFile& StateFile::operator=(StateFile&& other) noexcept {
  if (this != &other) {
    close_dir();
    dir_ = std::move(other.dir_);
    dir_fd_ = std::exchange(other.dir_fd_, -1);
    record_ = other.record_;
    fresh_ = other.fresh_;
    stores_ = other.stores_;
  }
  return *this;
}

StateFile::~StateFile() { close_dir(); }

void StateFile::close_dir() noexcept {
  // Closing the descriptor also drops the flock.
  if (dir_fd_ >= 0) ::close(dir_fd_);
  dir_fd_ = -1;
}

StateFile StateFile::open(const std::filesystem::path& dir_in, const StateFileOptions& options) {
  // "data/" names the same directory as "data"; its parent is then ".", not "data".
  std::filesystem::path dir = dir_in;
  if (!dir.has_filename() && dir.has_parent_path()) dir = dir.parent_path();

  std::error_code ec;
  const bool created = std::filesystem::create_directories(dir, ec);
  if (ec) {
    fail(Errc::unavailable, "cannot create data directory " + quoted(dir) + ": " + ec.message());
  }
  if (created) fsync_parent_of(dir);

  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail(err == ENOTDIR ? Errc::invalid_argument : Errc::unavailable,
         "cannot open data directory " + quoted(dir) + ": " + errno_text(err));
  }
  StateFile file(dir, fd);  // owns fd from here on, also when something below throws
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      fail(Errc::unavailable,
           "data directory " + quoted(dir) + " is in use by another wardend (it is locked)");
    }
    fail(Errc::unavailable, "cannot lock data directory " + quoted(dir) + ": " + errno_text(err));
  }

  const std::filesystem::path path = dir / kFileName;
  const int state_fd = ::openat(fd, std::string(kFileName).c_str(), O_RDONLY | O_CLOEXEC);
  if (state_fd >= 0) {
    std::vector<std::byte> bytes;
    int sync_err = 0;
    try {
      bytes = read_file(state_fd, path);
      // A previous run may have crashed between its rename and its directory fsync:
      // make what we act on durable before relying on it.
      sync_err = fsync_retrying(state_fd);
      if (sync_err == 0) sync_err = fsync_retrying(fd);
    } catch (...) {
      ::close(state_fd);
      throw;
    }
    ::close(state_fd);
    if (sync_err != 0) {
      fail(Errc::unavailable, "cannot fsync " + quoted(path) + ": " + errno_text(sync_err));
    }
    file.record_ = decode_state(bytes, path.string());
    return file;
  }
  if (const int err = errno; err != ENOENT) {
    fail(Errc::unavailable, "cannot open " + quoted(path) + ": " + errno_text(err));
  }

  // No state. An empty directory is new. Anything else in it means the state was lost
  // (deleted, or the very first update was cut short): tokens handed out before are
  // unknown, so starting over could hand them out again.
  const std::vector<std::string> others = entries_of(dir);
  if (!others.empty() && !options.allow_fresh) {
    fail(Errc::invalid_argument,
         "data directory " + quoted(dir) + " holds " + list_some(others) + " but no '" +
             std::string(kFileName) +
             "' file: the state was deleted or never completed, and starting over could "
             "hand out fencing tokens again and grant locks that are still held. Restore "
             "the file, use an empty directory, or override with --reset-state (dangerous)");
  }
  file.fresh_ = true;
  file.store(StateRecord{});
  return file;
}

void StateFile::store(const StateRecord& next) {
  if (next.reserved_upto < record_.reserved_upto || next.max_hold_ms < record_.max_hold_ms) {
    fail(Errc::internal, "refusing to lower the durable state in " + quoted(dir_) +
                             " (reserved_upto " + std::to_string(record_.reserved_upto) + " -> " +
                             std::to_string(next.reserved_upto) + ", max_hold_ms " +
                             std::to_string(record_.max_hold_ms) + " -> " +
                             std::to_string(next.max_hold_ms) + ")");
  }
  const std::string tmp(kTempName);
  const std::string final_name(kFileName);
  const auto failed = [&](const std::string& step, int err) {
    fail(Errc::unavailable, "cannot persist the state in " + quoted(dir_) + ": " + step +
                                " failed: " + errno_text(err));
  };

  const auto bytes = encode_state(next);
  const int fd = ::openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    failed("creating '" + tmp + "'", err);
  }
  int err = write_all(fd, bytes);
  std::string step = "writing '" + tmp + "'";
  if (err == 0) {
    err = fsync_retrying(fd);
    step = "fsync of '" + tmp + "'";
  }
  // close() can report a deferred write error too (NFS); it is not retried on EINTR
  // because on Linux the descriptor is gone either way.
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    step = "closing '" + tmp + "'";
  }
  if (err == 0 && ::renameat(dir_fd_, tmp.c_str(), dir_fd_, final_name.c_str()) != 0) {
    err = errno;
    step = "renaming '" + tmp + "' to '" + final_name + "'";
  }
  if (err != 0) {
    // Best effort: the next store truncates it anyway, and open ignores it.
    ::unlinkat(dir_fd_, tmp.c_str(), 0);
    failed(step, err);
  }
  // The rename is durable only once the directory is.
  if (const int dir_err = fsync_retrying(dir_fd_); dir_err != 0) {
    failed("fsync of the directory", dir_err);
  }
  record_ = next;
  ++stores_;
}

}  // namespace warden::server
