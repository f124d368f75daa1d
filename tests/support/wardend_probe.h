// A raw hiredis view of a wardend, behind the engine's back: what the server itself
// says about a lock (INSPECT) or about its connections (INFO). Each call connects anew,
// so a probe keeps working across server restarts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace warden::testing {

class WardendProbe {
 public:
  explicit WardendProbe(std::uint16_t port, std::string password = {});

  struct LockState {
    std::vector<std::uint64_t> holder_tokens;
    std::size_t waiters = 0;
  };
  // INSPECT key. Throws std::runtime_error if the server does not answer as expected.
  LockState inspect(const std::string& key) const;
  // A numeric field of INFO ("connections", "waiters", ...).
  std::int64_t info(const std::string& field) const;
  // RELEASE key token secret: true if it was held (and the secret was its owner's).
  bool release(const std::string& key, std::uint64_t token, const std::string& secret) const;

 private:
  std::uint16_t port_;
  std::string password_;
};

}  // namespace warden::testing
