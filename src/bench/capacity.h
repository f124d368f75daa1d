// bench/capacity.h — wardend's capacity checks, modes of `warden bench`: memory per
// held lock, and many idle connections. Both speak RESP to wardend directly (one raw
// connection per socket, no warden::Client) and read wardend's INFO, whose rss_bytes
// field is the server's resident set (from /proc/self/statm).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace warden::bench {

struct HoldLocksResult {
  std::uint64_t locks = 0;
  std::size_t key_bytes = 0;       // bytes of each key "bench-mem/<name>" as sent
  std::uint64_t rss_before = 0;    // server RSS before the first ACQUIRE
  std::uint64_t rss_held = 0;      // ... with every lock held
  std::uint64_t rss_released = 0;  // ... after releasing them all
  std::uint64_t holders_held = 0;  // INFO holders: with every lock held
  double bytes_per_lock = 0;       // (rss_held - rss_before) / locks
  double acquire_seconds = 0;
  double release_seconds = 0;
};

// Acquires `locks` exclusive locks "bench-mem/<i>" (i zero-padded to `name_bytes`
// digits, 1..locks) with a 10-minute TTL on one connection, pipelined in batches of
// `batch`, reads INFO before and after, then releases them all (pipelined). Throws
// warden::Error; Error(internal) if INFO has no rss_bytes, Error(resource_exhausted)
// if a lock is refused (held already, or the server's key limit).
HoldLocksResult hold_locks(const std::string& url, std::uint64_t locks, std::size_t name_bytes,
                           std::size_t batch);

struct IdleConnectionsResult {
  std::uint64_t requested = 0;
  std::uint64_t opened = 0;              // connections that were open at the peak
  std::uint64_t server_connections = 0;  // INFO connections with all of them open
  std::uint64_t rss_before = 0;          // server RSS with one connection
  std::uint64_t rss_connected = 0;       // ... with all of them
  std::chrono::milliseconds held{0};
  double connect_seconds = 0;
  std::optional<std::string> failure;  // the first failure; nullopt = every check passed
  bool ok() const { return !failure; }
};

// Raises this process's descriptor limit (soft to hard), opens `connections` TCP
// connections to wardend, PINGs each, checks INFO connections >= `connections`,
// keeps them open for `hold`, PINGs each again and closes them. A failing step is
// reported in the result, not thrown. Throws Error(invalid_argument) for a bad URL
// and Error(resource_exhausted) if the descriptor limit cannot reach `connections`.
IdleConnectionsResult idle_connections(const std::string& url, std::uint64_t connections,
                                       std::chrono::milliseconds hold);

}  // namespace warden::bench
