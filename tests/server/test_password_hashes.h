// server/test_password_hashes.h — argon2id hashes for the dispatcher tests' users files,
// each made once per process: a hash costs a little even at libsodium's minimum.
#pragma once

#include <map>
#include <string>

#include "server/password_hash.h"

namespace warden::server {

inline const std::string& hash_of(const std::string& password) {
  static std::map<std::string, std::string> hashes;
  auto it = hashes.find(password);
  if (it == hashes.end()) {
    it = hashes.emplace(password, hash_password(password, kMinimumCost)).first;
  }
  return it->second;
}

}  // namespace warden::server
