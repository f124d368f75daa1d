#include "server/password_check.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>

namespace warden::server {
namespace {

using Digest = std::array<unsigned char, 32>;

bool sha256(std::string_view text, Digest& out) noexcept {
  unsigned int length = 0;
  return EVP_Digest(text.data(), text.size(), out.data(), &length, EVP_sha256(), nullptr) == 1 &&
         length == out.size();
}

}  // namespace

bool password_matches(std::string_view given, std::string_view expected) noexcept {
  Digest a{};
  Digest b{};
  // Both digests are always computed, so a failure cannot short-cut the timing either.
  const bool hashed_given = sha256(given, a);
  const bool hashed_expected = sha256(expected, b);
  const bool same = CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
  return hashed_given && hashed_expected && same;
}

}  // namespace warden::server
