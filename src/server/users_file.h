// server/users_file.h — wardend's users file (--users FILE): who may connect, with which
// password, to which lock groups, with which rights.
//
// One user per line, four fields separated by spaces or tabs:
//
//   # name   password hash (wardend --hash-password)            groups          rights
//   billing  $argon2id$v=19$m=65536,t=2,p=1$<salt>$<hash>       billing,inv-*   lock
//   ops      $argon2id$v=19$m=65536,t=2,p=1$<salt>$<hash>       *               inspect,admin
//
//   name    [A-Za-z0-9._-]{1,64}, unique; `default` is reserved for --requirepass
//   hash    a libsodium crypto_pwhash_str() string for argon2id with p=1, memory at most
//           kMaxHashMemoryKib, passes at most kMaxHashPasses (what it costs the server to
//           check a password is decided by this string, so the file bounds it)
//   groups  comma-separated globs over group names (`*`, `?`), at least one
//   rights  comma-separated, each once: lock, inspect, admin (see rights.h)
//
// Blank lines and lines whose first non-blank character is `#` are ignored. The parser
// is strict: any defect rejects the whole file with an Error (invalid_argument) whose
// message is `FILE:LINE: why`, so a typo never silently locks someone out or in. The
// message never quotes a hash, nor a field that is not in a safe character set (a
// password pasted into the wrong column is not echoed to a log).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/rights.h"

namespace warden::server {

inline constexpr std::size_t kMaxUsers = 10'000;
inline constexpr std::size_t kMaxUsersLineBytes = 1024;
inline constexpr std::size_t kMaxUsersFileBytes = 4 * 1024 * 1024;
inline constexpr std::size_t kMaxPatternsPerUser = 64;
inline constexpr std::uint64_t kMaxHashMemoryKib = 256 * 1024;  // 256 MiB per check
inline constexpr std::uint64_t kMaxHashPasses = 16;

struct User {
  std::string name;
  std::string hash;                 // crypto_pwhash_str() form; never logged
  std::vector<std::string> groups;  // glob patterns
  Rights rights = 0;
};

class UserTable {
 public:
  // The user called `name`, or nullptr.
  const User* find(std::string_view name) const;
  std::size_t size() const { return users_.size(); }

  // The hash an unknown name's password is checked against (and the result thrown
  // away), so that a name that does not exist costs what a wrong password costs and
  // names cannot be probed by timing: the first user's hash, or, for a table without
  // users, a built-in one of --hash-password's cost whose password nobody knows.
  const std::string& decoy_hash() const;

  // For the parser: false if the name is taken.
  bool add(User user);

  std::string file;  // where it was read from, for log lines

 private:
  std::map<std::string, User, std::less<>> users_;
  std::string first_hash_;
};

// Parses a users file's bytes. `file` names it in messages. Throws Error
// (invalid_argument) "FILE:LINE: why" on the first defect.
UserTable parse_users(std::string_view text, std::string_view file);

// Reads and parses `path`. Throws Error (invalid_argument) naming the file when it cannot
// be read, is larger than kMaxUsersFileBytes, or has a defect.
std::shared_ptr<const UserTable> read_users_file(const std::string& path);

}  // namespace warden::server
