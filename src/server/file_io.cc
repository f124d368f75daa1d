#include "server/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "warden/error.h"

namespace warden::server::file_io {

std::string errno_text(int err) { return std::system_category().message(err); }

// Built with append: g++ 12 at -O2 reports a false -Wrestrict on "'" + std::string&&.
std::string quoted(const std::filesystem::path& path) {
  std::string out = "'";
  out.append(path.string()).append("'");
  return out;
}

void put_u32(std::byte* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(v >> (8 * i));
}

void put_u64(std::byte* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(v >> (8 * i));
}

std::uint32_t get_u32(const std::byte* in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::to_integer<std::uint32_t>(in[i]) << (8 * i);
  return v;
}

std::uint64_t get_u64(const std::byte* in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::to_integer<std::uint64_t>(in[i]) << (8 * i);
  return v;
}

int write_all(int fd, std::span<const std::byte> data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

int fsync_retrying(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

std::vector<std::byte> read_whole(int fd, const std::filesystem::path& path,
                                  std::uint64_t max_bytes, const std::string& what,
                                  const std::string& expected) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    throw Error(Errc::unavailable, "cannot stat " + quoted(path) + ": " + errno_text(err));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw Error(Errc::internal, what + " " + quoted(path) + " is damaged: it has " +
                                    std::to_string(size) + " bytes, " + expected);
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(size) + 1);
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      throw Error(Errc::unavailable, "cannot read " + quoted(path) + ": " + errno_text(err));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace warden::server::file_io
