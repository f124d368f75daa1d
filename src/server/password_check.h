// server/password_check.h — comparing a client's password with the server's without
// telling an attacker, through the time the comparison takes, how much of it was right.
#pragma once

#include <string_view>

namespace warden::server {

// true iff `given` equals `expected`. Takes the same time whatever bytes differ and
// whatever the length of `given`: both are hashed (SHA-256) and the digests compared in
// constant time (OpenSSL's CRYPTO_memcmp), so neither a common prefix nor a length is
// revealed. Never throws; an empty `expected` matches only an empty `given`.
bool password_matches(std::string_view given, std::string_view expected) noexcept;

}  // namespace warden::server
