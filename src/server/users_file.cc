#include "server/users_file.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "warden/error.h"

namespace warden::server {
namespace {

// The hash of 32 random bytes that were thrown away, at --hash-password's cost
// (OPSLIMIT_INTERACTIVE, MEMLIMIT_INTERACTIVE): a decoy no password matches.
constexpr std::string_view kBuiltInDecoy =
    "$argon2id$v=19$m=65536,t=2,p=1$K09B7u9hNHMhQZuuQ/pLRA$"
    "91XKDyNJOY5rYKkTAi+WNKxi/V09WMK+JPJ2itpkY5g";

constexpr std::string_view kReserved = "default";

struct Defect {
  std::string why;
};

bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool is_pattern_char(char c) { return is_name_char(c) || c == '*' || c == '?'; }

bool is_base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

template <typename Pred>
bool all_of(std::string_view s, Pred pred) {
  for (const char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}

// `text` quoted when it is short and made of name or pattern characters only, so no
// password pasted into a field ever reaches a message; otherwise a description.
std::string shown(std::string_view text) {
  if (!text.empty() && text.size() <= 64 && all_of(text, is_pattern_char)) {
    return "'" + std::string(text) + "'";
  }
  return "(" + std::to_string(text.size()) + " bytes, not shown)";
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const auto at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// "key=<decimal>" → the number, within 1..max.
std::uint64_t hash_param(std::string_view field, std::string_view key, std::uint64_t max) {
  if (!field.starts_with(key) || field.size() <= key.size() || field[key.size()] != '=') {
    throw Defect{"the hash's parameters are not m=...,t=...,p=..."};
  }
  const std::string_view digits = field.substr(key.size() + 1);
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
      digits.front() == '0' || value == 0 || value > max) {
    throw Defect{"the hash's " + std::string(key) + " is not a number in 1.." +
                 std::to_string(max)};
  }
  return value;
}

// Checks the form of a crypto_pwhash_str() string for argon2id and bounds its cost.
// Only its structure is checked here; libsodium decodes it when a password is verified.
void check_hash(std::string_view hash) {
  constexpr std::string_view kPrefix = "$argon2id$";
  if (!hash.starts_with(kPrefix)) {
    throw Defect{
        "the password hash is not an argon2id hash (it must start with $argon2id$; "
        "make one with wardend --hash-password)"};
  }
  const auto parts = split(hash.substr(1), '$');  // argon2id, v=19, params, salt, hash
  if (parts.size() != 5) throw Defect{"the password hash has not 5 $-separated parts"};
  if (parts[1] != "v=19") throw Defect{"the password hash's version is not v=19"};
  const auto params = split(parts[2], ',');
  if (params.size() != 3) throw Defect{"the hash's parameters are not m=...,t=...,p=..."};
  hash_param(params[0], "m", kMaxHashMemoryKib);
  hash_param(params[1], "t", kMaxHashPasses);
  if (hash_param(params[2], "p", 1) != 1) throw Defect{"the hash's p must be 1"};
  if (parts[3].size() < 11 || parts[3].size() > 86 || !all_of(parts[3], is_base64_char)) {
    throw Defect{"the password hash's salt is not base64 of 8..64 bytes"};
  }
  if (parts[4].size() < 22 || parts[4].size() > 86 || !all_of(parts[4], is_base64_char)) {
    throw Defect{"the password hash's digest is not base64 of 16..64 bytes"};
  }
}

std::vector<std::string> parse_groups(std::string_view field) {
  std::vector<std::string> out;
  for (const auto pattern : split(field, ',')) {
    if (pattern.empty()) throw Defect{"an empty group pattern (check the commas)"};
    if (pattern.size() > 64 || !all_of(pattern, is_pattern_char)) {
      throw Defect{"group pattern " + shown(pattern) +
                   " is not 1..64 of [A-Za-z0-9._-] and the wildcards * ?"};
    }
    if (out.size() == kMaxPatternsPerUser) {
      throw Defect{"more than " + std::to_string(kMaxPatternsPerUser) + " group patterns"};
    }
    out.emplace_back(pattern);
  }
  return out;
}

Rights parse_rights(std::string_view field) {
  Rights rights = 0;
  for (const auto word : split(field, ',')) {
    Rights right = 0;
    if (word == "lock") right = kRightLock;
    if (word == "inspect") right = kRightInspect;
    if (word == "admin") right = kRightAdmin;
    if (right == 0) {
      throw Defect{"unknown right " + shown(word) + " (rights are lock, inspect, admin)"};
    }
    if ((rights & right) != 0) throw Defect{"right '" + std::string(word) + "' given twice"};
    rights |= right;
  }
  return rights;
}

// One non-comment line → a User.
User parse_line(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t pos = 0;
  while (pos < line.size()) {
    const auto start = line.find_first_not_of(" \t", pos);
    if (start == std::string_view::npos) break;
    auto end = line.find_first_of(" \t", start);
    if (end == std::string_view::npos) end = line.size();
    if (fields.size() == 4) {
      throw Defect{"more than 4 fields (name, password hash, groups, rights)"};
    }
    fields.push_back(line.substr(start, end - start));
    pos = end;
  }
  if (fields.size() < 4) {
    throw Defect{"expected 4 fields (name, password hash, groups, rights), found " +
                 std::to_string(fields.size())};
  }
  User user;
  if (fields[0].size() > 64 || !all_of(fields[0], is_name_char)) {
    throw Defect{"user name " + shown(fields[0]) + " is not 1..64 of [A-Za-z0-9._-]"};
  }
  if (fields[0] == kReserved) {
    throw Defect{"the name 'default' is reserved for the --requirepass user"};
  }
  user.name = std::string(fields[0]);
  check_hash(fields[1]);
  user.hash = std::string(fields[1]);
  user.groups = parse_groups(fields[2]);
  user.rights = parse_rights(fields[3]);
  return user;
}

}  // namespace

const User* UserTable::find(std::string_view name) const {
  const auto it = users_.find(name);
  return it == users_.end() ? nullptr : &it->second;
}

const std::string& UserTable::decoy_hash() const {
  static const std::string built_in(kBuiltInDecoy);
  return first_hash_.empty() ? built_in : first_hash_;
}

bool UserTable::add(User user) {
  if (users_.contains(user.name)) return false;
  if (first_hash_.empty()) first_hash_ = user.hash;
  std::string name = user.name;
  users_.emplace(std::move(name), std::move(user));
  return true;
}

UserTable parse_users(std::string_view text, std::string_view file) {
  UserTable table;
  table.file = std::string(file);
  std::size_t number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    ++number;
    auto eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    try {
      if (line.size() > kMaxUsersLineBytes) {
        throw Defect{"line longer than " + std::to_string(kMaxUsersLineBytes) + " bytes"};
      }
      if (line.ends_with('\r')) line.remove_suffix(1);  // files written on Windows
      if (line.find('\0') != std::string_view::npos) throw Defect{"a NUL byte"};
      const auto first = line.find_first_not_of(" \t");
      if (first == std::string_view::npos || line[first] == '#') continue;
      for (const char c : line) {
        const auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && c != '\t') || u >= 0x7f) {
          throw Defect{"a control or non-ASCII byte outside a comment"};
        }
      }
      User user = parse_line(line);
      if (table.size() == kMaxUsers) {
        throw Defect{"more than " + std::to_string(kMaxUsers) + " users"};
      }
      const std::string name = user.name;
      if (!table.add(std::move(user))) throw Defect{"user '" + name + "' is defined twice"};
    } catch (const Defect& d) {
      throw Error(Errc::invalid_argument,
                  std::string(file) + ":" + std::to_string(number) + ": " + d.why);
    }
  }
  return table;
}

std::shared_ptr<const UserTable> read_users_file(const std::string& path) {
  // A directory opens and reads as empty: that would lock everybody out, silently.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(Errc::invalid_argument, path + ": not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::invalid_argument, path + ": cannot open the users file");
  std::string text;
  text.resize(kMaxUsersFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw Error(Errc::invalid_argument, path + ": cannot read the users file");
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxUsersFileBytes) {
    throw Error(Errc::invalid_argument,
                path + ": larger than " + std::to_string(kMaxUsersFileBytes) + " bytes");
  }
  return std::make_shared<const UserTable>(parse_users(text, path));
}

}  // namespace warden::server
