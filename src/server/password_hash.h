// server/password_hash.h — wardend's user passwords: libsodium's crypto_pwhash (argon2id).
//
// Checking one password costs what its hash says (--hash-password: about 64 MiB and
// tens of milliseconds), which is why the server checks off its event loop (see
// auth_worker.h) and the users file bounds the cost (users_file.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace warden::server {

// What hashing (and later checking) one password costs: argon2id passes and memory.
struct HashCost {
  unsigned long long passes;
  std::size_t memory_bytes;
};
// libsodium's OPSLIMIT_INTERACTIVE / MEMLIMIT_INTERACTIVE: --hash-password's cost.
inline constexpr HashCost kInteractiveCost{2, 64 * 1024 * 1024};
// libsodium's minimum: for tests, which hash many passwords and need no strength.
inline constexpr HashCost kMinimumCost{1, 8192};

// The crypto_pwhash_str() line for `password`: argon2id with OPSLIMIT_INTERACTIVE and
// MEMLIMIT_INTERACTIVE and a fresh random salt. Throws Error (invalid_argument) for an
// empty password, (resource_exhausted) if libsodium cannot get the memory.
std::string hash_password(std::string_view password);

// The same with the given cost (tests use kMinimumCost to run fast).
std::string hash_password(std::string_view password, HashCost cost);

// true iff `password` matches `hash` (a crypto_pwhash_str() string). False, never an
// exception, for a malformed hash or when the memory for the check is not there.
// libsodium compares the digests in constant time.
bool verify_password(const std::string& hash, std::string_view password) noexcept;

}  // namespace warden::server
