#include "server/owner_secrets.h"

#include <algorithm>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "warden/error.h"

namespace warden::server {

OwnerSecrets::OwnerSecrets() {
  std::array<unsigned char, 32> key{};
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    throw Error(Errc::internal, "the system's random number generator failed");
  }
  char digest_name[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
      OSSL_PARAM_construct_end()};
  mac_ = EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr);
  ctx_ = mac_ != nullptr ? EVP_MAC_CTX_new(mac_) : nullptr;
  const bool keyed = ctx_ != nullptr && EVP_MAC_init(ctx_, key.data(), key.size(), params) == 1;
  // The context keeps the key; nothing else does.
  OPENSSL_cleanse(key.data(), key.size());
  if (!keyed) {
    EVP_MAC_CTX_free(ctx_);
    EVP_MAC_free(mac_);
    throw Error(Errc::internal, "OpenSSL offers no HMAC-SHA256 for owner secrets");
  }
}

OwnerSecrets::~OwnerSecrets() {
  EVP_MAC_CTX_free(ctx_);
  EVP_MAC_free(mac_);
}

OwnerSecrets::Secret OwnerSecrets::of(std::string_view key, std::uint64_t token) const {
  unsigned char token_bytes[8];
  for (int i = 0; i < 8; ++i) token_bytes[i] = static_cast<unsigned char>(token >> (56 - 8 * i));
  unsigned char out[32];
  std::size_t out_size = 0;
  const bool ok =
      // No key given: HMAC starts again with the one the constructor set (about 0.3 µs a
      // secret, against 0.9 µs when the key is given every time).
      EVP_MAC_init(ctx_, nullptr, 0, nullptr) == 1 &&
      EVP_MAC_update(ctx_, token_bytes, sizeof token_bytes) == 1 &&
      EVP_MAC_update(ctx_, reinterpret_cast<const unsigned char*>(key.data()), key.size()) == 1 &&
      EVP_MAC_final(ctx_, out, &out_size, sizeof out) == 1 && out_size == sizeof out;
  if (!ok) throw Error(Errc::internal, "HMAC of an owner secret failed");
  Secret secret{};
  std::copy(out, out + secret.size(), secret.begin());
  OPENSSL_cleanse(out, sizeof out);
  return secret;
}

}  // namespace warden::server
