// server/table_snapshot.cc — the snapshot's encoding, its checks, its atomic write and
// its one-time consumption.
#include "server/table_snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "core/names.h"
#include "server/file_io.h"
#include "warden/election.h"
#include "warden/error.h"
#include "warden/options.h"

namespace warden::server {
namespace {

using file_io::errno_text;
using file_io::fsync_retrying;
using file_io::get_u32;
using file_io::quoted;
using file_io::write_all;

constexpr std::size_t kHeaderSize = 40;
constexpr std::size_t kCrcSize = 4;

[[noreturn]] void fail(Errc code, const std::string& message) { throw Error(code, message); }

// Appends little-endian integers.
class Writer {
 public:
  void u8(std::uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void bytes(std::span<const std::byte> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void text(std::string_view s) { bytes(std::as_bytes(std::span(s.data(), s.size()))); }
  std::vector<std::byte>& out() { return out_; }

 private:
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  std::vector<std::byte> out_;
};

// Reads little-endian integers, failing with "truncated" at the end of the data.
class Reader {
 public:
  Reader(std::span<const std::byte> data, const std::string& name) : data_(data), name_(name) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(get(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(get(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
  std::uint64_t u64() { return get(8); }
  std::span<const std::byte> bytes(std::size_t n) {
    need(n);
    const auto out = data_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  std::string text(std::size_t n) {
    const auto b = bytes(n);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  std::size_t left() const { return data_.size() - pos_; }

 private:
  void need(std::size_t n) const {
    if (left() < n) fail(Errc::internal, name_ + " is damaged: truncated inside a record");
  }
  std::uint64_t get(int n) {
    need(static_cast<std::size_t>(n));
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::to_integer<std::uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += static_cast<std::size_t>(n);
    return v;
  }
  std::span<const std::byte> data_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

// The record's key as a lock identity, or a defect naming it.
void check_key(std::string_view key, const std::string& where) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) {
    fail(Errc::internal, where + " has a key that is not group/name");
  }
  try {
    core::validate_group(key.substr(0, slash));
    core::validate_name(key.substr(slash + 1));
  } catch (const Error& e) {
    fail(Errc::internal, where + " has an invalid key: " + e.what());
  }
}

// Everything a decoded snapshot must satisfy beyond its layout (see the header).
void check_consistent(const TableSnapshot& s, const std::string& name) {
  std::set<std::uint64_t> tokens;
  struct Held {
    Mode mode;
    std::uint32_t capacity;  // a semaphore's, or 0
    std::uint64_t permits;   // held on a semaphore
  };
  std::map<std::string_view, Held> keys;  // per key: what its holders hold
  for (std::size_t i = 0; i < s.holders.size(); ++i) {
    const SnapshotHolder& h = s.holders[i];
    const std::string where = name + " is damaged: holder " + std::to_string(i + 1);
    check_key(h.key, where);
    LockOptions options;
    options.ttl = std::chrono::milliseconds(
        static_cast<std::int64_t>(std::min<std::uint64_t>(h.ttl_ms, std::uint64_t{1} << 62)));
    options.lock_delay = std::chrono::milliseconds(static_cast<std::int64_t>(
        std::min<std::uint64_t>(h.lock_delay_ms, std::uint64_t{1} << 62)));
    try {
      core::validate_lock_options(options);
    } catch (const Error& e) {
      fail(Errc::internal, where + ": " + e.what());
    }
    if (h.ttl_ms + h.lock_delay_ms > s.state.max_hold_ms) {
      fail(Errc::internal, where + ": its ttl + lock_delay (" +
                               std::to_string(h.ttl_ms + h.lock_delay_ms) +
                               " ms) exceeds the durable max_hold (" +
                               std::to_string(s.state.max_hold_ms) + " ms)");
    }
    if (h.token == 0 || h.token > s.state.reserved_upto) {
      fail(Errc::internal, where + ": its token " + std::to_string(h.token) + " is outside 1.." +
                               std::to_string(s.state.reserved_upto));
    }
    if (!tokens.insert(h.token).second) {
      fail(Errc::internal, where + ": its token " + std::to_string(h.token) + " is held twice");
    }
    if (h.capacity > 0 && (h.mode != Mode::shared || h.permits == 0 ||
                           h.permits > h.capacity || h.capacity > core::kMaxPermits)) {
      fail(Errc::internal, where + ": " + std::to_string(h.permits) + " permits of a semaphore of " +
                               std::to_string(h.capacity));
    }
    const auto [it, first] = keys.emplace(h.key, Held{h.mode, h.capacity, 0});
    Held& held = it->second;
    if (!first && (h.mode == Mode::exclusive || held.mode == Mode::exclusive)) {
      fail(Errc::internal, where + ": an exclusive grant beside another grant on one key");
    }
    if (held.capacity != h.capacity) {
      fail(Errc::internal, where + ": a semaphore of another number of permits, or a lock's "
                                   "grant, beside a grant on one key");
    }
    held.permits += h.permits;
    if (held.permits > held.capacity && held.capacity > 0) {
      fail(Errc::internal, where + ": more permits held than the semaphore has");
    }
  }
  std::set<std::string_view> delayed;
  for (std::size_t i = 0; i < s.delays.size(); ++i) {
    const SnapshotDelay& d = s.delays[i];
    const std::string where = name + " is damaged: lock-delay " + std::to_string(i + 1);
    check_key(d.key, where);
    if (d.left_ms == 0 || d.left_ms > s.state.max_hold_ms) {
      fail(Errc::internal, where + ": " + std::to_string(d.left_ms) + " ms left is outside 1.." +
                               std::to_string(s.state.max_hold_ms));
    }
    if (!delayed.insert(d.key).second) {
      fail(Errc::internal, where + ": a second lock-delay on one key");
    }
  }
}

// The directory, opened for *at() calls and fsync; closed on destruction.
class DirFd {
 public:
  explicit DirFd(const std::filesystem::path& dir)
      : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0) {
      const int err = errno;
      fail(Errc::unavailable, "cannot open data directory " + quoted(dir) + ": " + errno_text(err));
    }
  }
  ~DirFd() { ::close(fd_); }
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads the whole file. Throws Error(internal) for one larger than
// kMaxTableSnapshotBytes (not read), Error(unavailable) on I/O errors.
std::vector<std::byte> read_all(int fd, const std::filesystem::path& path) {
  return file_io::read_whole(
      fd, path, kMaxTableSnapshotBytes, "table snapshot",
      "more than the " + std::to_string(kMaxTableSnapshotBytes) + " a snapshot may have");
}

}  // namespace

std::vector<std::byte> encode_table_snapshot(const TableSnapshot& s) {
  Writer w;
  w.text(kTableMagic);
  w.u32(kTableFormatVersion);
  w.u64(s.state.reserved_upto);
  w.u64(s.state.max_hold_ms);
  w.u32(static_cast<std::uint32_t>(s.holders.size()));
  w.u32(static_cast<std::uint32_t>(s.delays.size()));
  for (const SnapshotHolder& h : s.holders) {
    // Only an exclusive lock's grant carries a value (the dispatcher takes VALUE on
    // nothing else).
    const bool leader = h.capacity == 0 && h.mode == Mode::exclusive && !h.value.empty();
    w.u8(h.capacity > 0 ? 2 : leader ? 3 : h.mode == Mode::shared ? 1 : 0);
    w.u16(static_cast<std::uint16_t>(h.key.size()));
    w.text(h.key);
    w.u64(h.token);
    w.bytes(std::as_bytes(std::span(h.secret)));
    w.u64(h.ttl_ms);
    w.u64(h.lock_delay_ms);
    if (h.capacity > 0) {
      w.u32(h.capacity);
      w.u32(h.permits);
    }
    if (leader) {
      w.u16(static_cast<std::uint16_t>(h.value.size()));
      w.text(h.value);
    }
  }
  for (const SnapshotDelay& d : s.delays) {
    w.u16(static_cast<std::uint16_t>(d.key.size()));
    w.text(d.key);
    w.u64(d.left_ms);
  }
  w.u32(crc32c(w.out()));
  return std::move(w.out());
}

TableSnapshot decode_table_snapshot(std::span<const std::byte> bytes, std::string_view file) {
  const std::string name = "table snapshot '" + std::string(file) + "'";
  const std::size_t magic_seen = std::min(bytes.size(), kTableMagic.size());
  if (magic_seen > 0 && std::memcmp(bytes.data(), kTableMagic.data(), magic_seen) != 0) {
    fail(Errc::invalid_argument,
         name + " is not a wardend table snapshot (it does not start with \"WARDEN-TABLE\")");
  }
  if (bytes.size() < kHeaderSize + kCrcSize) {
    fail(Errc::internal, name + " is damaged: truncated to " + std::to_string(bytes.size()) +
                             " bytes, shorter than its header");
  }
  if (bytes.size() > kMaxTableSnapshotBytes) {
    fail(Errc::internal, name + " is damaged: it is larger than " +
                             std::to_string(kMaxTableSnapshotBytes) + " bytes");
  }
  const std::uint32_t version = get_u32(bytes.data() + kTableMagic.size());
  if (version != kTableFormatVersion) {
    fail(Errc::invalid_argument, name + " has format version " + std::to_string(version) +
                                     ", but this wardend reads only version " +
                                     std::to_string(kTableFormatVersion));
  }
  const auto body = bytes.first(bytes.size() - kCrcSize);
  if (crc32c(body) != get_u32(bytes.data() + body.size())) {
    fail(Errc::internal, name +
                             " is damaged: its CRC-32C checksum does not match its contents "
                             "(truncated, overwritten or with bytes appended)");
  }

  Reader r(body.subspan(kTableMagic.size() + 4), name);
  TableSnapshot s;
  s.state.reserved_upto = r.u64();
  s.state.max_hold_ms = r.u64();
  const std::uint32_t holders = r.u32();
  const std::uint32_t delays = r.u32();
  // Each record takes some bytes: a count the file cannot hold is damage, and must not
  // make us reserve memory for it.
  constexpr std::size_t kMinHolder = 1 + 2 + 8 + 16 + 8 + 8;
  constexpr std::size_t kMinDelay = 2 + 8;
  if (holders > r.left() / kMinHolder || delays > r.left() / kMinDelay) {
    fail(Errc::internal, name + " is damaged: it counts " + std::to_string(holders) +
                             " holders and " + std::to_string(delays) +
                             " lock-delays, more than its size allows");
  }
  s.holders.reserve(holders);
  for (std::uint32_t i = 0; i < holders; ++i) {
    SnapshotHolder h;
    const std::uint8_t mode = r.u8();
    if (mode > 3) {
      fail(Errc::internal, name + " is damaged: holder " + std::to_string(i + 1) + " has mode " +
                               std::to_string(mode));
    }
    h.mode = mode == 0 || mode == 3 ? Mode::exclusive : Mode::shared;
    h.key = r.text(r.u16());
    h.token = r.u64();
    const auto secret = r.bytes(h.secret.size());
    std::memcpy(h.secret.data(), secret.data(), secret.size());
    h.ttl_ms = r.u64();
    h.lock_delay_ms = r.u64();
    if (mode == 2) {
      h.capacity = r.u32();
      h.permits = r.u32();
      if (h.capacity == 0) {
        fail(Errc::internal, name + " is damaged: holder " + std::to_string(i + 1) +
                                 " is a semaphore's of 0 permits");
      }
    }
    if (mode == 3) {
      h.value = r.text(r.u16());
      if (h.value.empty() || h.value.size() > kMaxLeaderValueBytes) {
        fail(Errc::internal, name + " is damaged: holder " + std::to_string(i + 1) +
                                 " is a leader with a value of " + std::to_string(h.value.size()) +
                                 " bytes");
      }
    }
    s.holders.push_back(std::move(h));
  }
  s.delays.reserve(delays);
  for (std::uint32_t i = 0; i < delays; ++i) {
    SnapshotDelay d;
    d.key = r.text(r.u16());
    d.left_ms = r.u64();
    s.delays.push_back(std::move(d));
  }
  if (r.left() != 0) {
    fail(Errc::internal,
         name + " is damaged: " + std::to_string(r.left()) + " bytes follow its last record");
  }
  check_consistent(s, name);
  return s;
}

void TableSnapshotFile::write(const std::filesystem::path& dir, const TableSnapshot& snapshot) {
  const std::string tmp(kTempName);
  const std::string final_name(kFileName);
  const auto failed = [&](const std::string& step, int err) {
    fail(Errc::unavailable, "cannot write the table snapshot in " + quoted(dir) + ": " + step +
                                " failed: " + errno_text(err));
  };
  const auto bytes = encode_table_snapshot(snapshot);
  const DirFd dir_fd(dir);
  const int fd =
      ::openat(dir_fd.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
  if (::close(fd) != 0 && err == 0) {
    err = errno;
    step = "closing '" + tmp + "'";
  }
  if (err == 0 && ::renameat(dir_fd.get(), tmp.c_str(), dir_fd.get(), final_name.c_str()) != 0) {
    err = errno;
    step = "renaming '" + tmp + "' to '" + final_name + "'";
  }
  if (err != 0) {
    ::unlinkat(dir_fd.get(), tmp.c_str(), 0);
    failed(step, err);
  }
  if (const int dir_err = fsync_retrying(dir_fd.get()); dir_err != 0) {
    failed("fsync of the directory", dir_err);
  }
}

TableSnapshotFile::Taken TableSnapshotFile::take(const std::filesystem::path& dir,
                                                 const StateRecord& current) {
  const DirFd dir_fd(dir);
  // What an interrupted write left: never renamed, so never a clean mark.
  ::unlinkat(dir_fd.get(), std::string(kTempName).c_str(), 0);

  const std::filesystem::path path = dir / kFileName;
  const int fd = ::openat(dir_fd.get(), std::string(kFileName).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return {};
    fail(Errc::unavailable, "cannot open " + quoted(path) + ": " + errno_text(err));
  }
  Taken taken;
  try {
    std::vector<std::byte> bytes;
    try {
      bytes = read_all(fd, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    TableSnapshot s = decode_table_snapshot(bytes, path.string());
    if (s.state == current) {
      taken.snapshot = std::move(s);
    } else {
      taken.defect =
          "table snapshot " + quoted(path) + " was written for another state (reserved_upto " +
          std::to_string(s.state.reserved_upto) + ", max_hold_ms " +
          std::to_string(s.state.max_hold_ms) + "; the state file holds " +
          std::to_string(current.reserved_upto) + ", " + std::to_string(current.max_hold_ms) + ")";
    }
  } catch (const Error& e) {
    if (e.code() == Errc::unavailable) throw;  // not a defect of the file: cannot start
    taken.defect = e.what();
  }

  // Consumed before anything is served: deleted, or kept aside under another name.
  const std::string name(kFileName);
  int err = 0;
  std::string step;
  if (taken.snapshot) {
    if (::unlinkat(dir_fd.get(), name.c_str(), 0) != 0) err = errno;
    step = "deleting it";
  } else {
    const std::string aside(kDamagedName);
    if (::renameat(dir_fd.get(), name.c_str(), dir_fd.get(), aside.c_str()) != 0) err = errno;
    step = "renaming it to '" + aside + "'";
  }
  if (err == 0) {
    err = fsync_retrying(dir_fd.get());
    step = "fsync of the directory";
  }
  if (err != 0) {
    fail(Errc::unavailable, "cannot consume the table snapshot " + quoted(path) +
                                " (a later start could restore it again): " + step +
                                " failed: " + errno_text(err));
  }
  return taken;
}

}  // namespace warden::server
