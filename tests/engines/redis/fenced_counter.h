// A counter in a file that several processes update while holding one warden lock:
// the shared resource of the contention test, fenced like a storage service that
// keeps a warden::FenceGate.
//
// Each call takes flock() on the file for its own atomicity only; mutual exclusion
// between lock holders is what the test checks, so a read and the write that follows
// it are separate calls with the lock (and nothing else) between them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace warden::testing {

class FencedCounter {
 public:
  // `file` is created (counter 0, no token seen) if it does not exist.
  explicit FencedCounter(std::filesystem::path file);

  // An exclusive holder's read: admits `token` if it is at least the highest token
  // admitted so far (and raises the highest to it); the counter, or nullopt if stale.
  std::optional<std::uint64_t> read_exclusive(std::uint64_t token) const;
  // A shared holder's read: the counter if `token` is not below the highest token
  // admitted by a writer (readers share a grant generation, so they do not raise it).
  std::optional<std::uint64_t> read_shared(std::uint64_t token) const;

  enum class Write { ok, stale, changed };
  // Sets the counter to `expected + 1` if `token` is still admissible and the counter
  // is still `expected`; `changed` means another writer got in between.
  Write increment(std::uint64_t token, std::uint64_t expected) const;

  std::uint64_t value() const;

 private:
  std::filesystem::path file_;
};

}  // namespace warden::testing
