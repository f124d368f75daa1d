// server/file_io.h — the POSIX steps wardend's durable files share (the state record,
// server/state_file.h, and the table snapshot, server/table_snapshot.h): writes and
// fsyncs retried on EINTR, a bounded read of a whole small file, little-endian fields,
// and messages that name the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace warden::server::file_io {

// strerror(err), thread-safe.
std::string errno_text(int err);
// 'path', for messages.
std::string quoted(const std::filesystem::path& path);

void put_u32(std::byte* out, std::uint32_t v);
void put_u64(std::byte* out, std::uint64_t v);
std::uint32_t get_u32(const std::byte* in);
std::uint64_t get_u64(const std::byte* in);

// Writes all of `data`, retrying on EINTR. Returns 0 or an errno value.
int write_all(int fd, std::span<const std::byte> data);
// fsync, retrying on EINTR. Returns 0 or an errno value.
int fsync_retrying(int fd);

// Reads the whole file open as `fd` (`path` names it in messages), one byte more than
// its size said, so that a file growing meanwhile reads as longer than it is. A file of
// more than `max_bytes` is not read: Error(internal) "`what` 'path' is damaged: it has N
// bytes, `expected`". Error(unavailable) on I/O errors.
std::vector<std::byte> read_whole(int fd, const std::filesystem::path& path,
                                  std::uint64_t max_bytes, const std::string& what,
                                  const std::string& expected);

}  // namespace warden::server::file_io
