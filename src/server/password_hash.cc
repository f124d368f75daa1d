#include "server/password_hash.h"

#include <sodium.h>

#include "warden/error.h"

namespace warden::server {

static_assert(kInteractiveCost.passes == crypto_pwhash_OPSLIMIT_INTERACTIVE);
static_assert(kInteractiveCost.memory_bytes == crypto_pwhash_MEMLIMIT_INTERACTIVE);
static_assert(kMinimumCost.passes == crypto_pwhash_OPSLIMIT_MIN);
static_assert(kMinimumCost.memory_bytes == crypto_pwhash_MEMLIMIT_MIN);

namespace {

void init_sodium() {
  // Thread-safe and idempotent; picks the fastest implementations for this CPU.
  if (sodium_init() < 0) throw Error(Errc::internal, "libsodium could not be initialised");
}

}  // namespace

std::string hash_password(std::string_view password) {
  return hash_password(password, kInteractiveCost);
}

std::string hash_password(std::string_view password, HashCost cost) {
  init_sodium();
  if (password.empty()) throw Error(Errc::invalid_argument, "the password is empty");
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str_alg(out, password.data(), password.size(), cost.passes, cost.memory_bytes,
                            crypto_pwhash_ALG_ARGON2ID13) != 0) {
    throw Error(Errc::resource_exhausted, "not enough memory to hash the password");
  }
  return out;
}

bool verify_password(const std::string& hash, std::string_view password) noexcept {
  if (sodium_init() < 0) return false;
  return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

}  // namespace warden::server
