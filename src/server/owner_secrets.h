// server/owner_secrets.h — the owner secret of a grant, derived instead of stored.
//
// Every grant's secret is HMAC-SHA256(server key, token ‖ lock key), cut to 128 bits. The
// server key is 256 bits from the OS CSPRNG, drawn when the dispatcher is made and never
// written anywhere, so a secret is as unguessable as one drawn at random, while a held
// lock costs no memory for it: the grant's (key, token) is all it takes to compute it
// again. Tokens are never reused, so no two grants share a secret.
//
// A wardend that restarts draws a new server key; the grants it restores from a snapshot
// keep the secrets their holders were given, which the dispatcher keeps beside them.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include <openssl/evp.h>

namespace warden::server {

class OwnerSecrets {
 public:
  using Secret = std::array<unsigned char, 16>;

  // Draws the server key; throws Error(internal) if the OS CSPRNG or HMAC is unavailable.
  OwnerSecrets();
  ~OwnerSecrets();
  OwnerSecrets(const OwnerSecrets&) = delete;
  OwnerSecrets& operator=(const OwnerSecrets&) = delete;

  // The secret of the grant `token` on `key`. Costs the same whether or not such a grant
  // is held, so RENEW and RELEASE can compute it for a grant that is not.
  Secret of(std::string_view key, std::uint64_t token) const;

 private:
  EVP_MAC* mac_ = nullptr;
  // Keyed once; reused for every secret, as the dispatcher is single-threaded.
  EVP_MAC_CTX* ctx_ = nullptr;
};

}  // namespace warden::server
