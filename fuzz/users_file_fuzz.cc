// fuzz/users_file_fuzz.cc — fuzz target for wardend's users file parser, parse_users
// (server/users_file.h): what SIGHUP makes the server read, whatever the file holds.
//
// The input is the file's bytes. What must hold for any bytes:
//   - parse_users returns a table or throws Error (invalid_argument) whose message
//     starts with "FILE:LINE: " for a line the input has, and never quotes a `$argon2id$v=`
//     hash; nothing else escapes;
//   - a table holds at most kMaxUsers users, each with a name of [A-Za-z0-9._-]{1,64}
//     other than `default`, a hash starting `$argon2id$`, 1..kMaxPatternsPerUser group
//     patterns and a non-empty set of known rights; find() finds each, and the decoy hash
//     is an argon2id hash;
//   - parsing is deterministic: the same bytes give the same table or the same message.
//
// A failed check prints what failed and aborts, which libFuzzer reports as a crash.
// See CMakeLists.txt here for running it.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "server/users_file.h"
#include "warden/error.h"

namespace warden::server {
namespace {

constexpr std::string_view kFile = "fuzz/users";

std::size_t count_lines(std::string_view text) {
  std::size_t lines = 0;
  for (std::size_t pos = 0; pos < text.size(); ++lines) {
    const auto eol = text.find('\n', pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
  }
  return lines;
}

// The table (as text) or the message: what determinism compares.
std::string outcome(std::string_view text) {
  try {
    const UserTable table = parse_users(text, kFile);
    return "table:" + std::to_string(table.size()) + ":" + table.decoy_hash();
  } catch (const Error& e) {
    return std::string("error:") + e.what();
  }
}

void check(std::string_view text) {
  try {
    const UserTable table = parse_users(text, kFile);
    WARDEN_FUZZ_CHECK(table.size() <= kMaxUsers);
    WARDEN_FUZZ_CHECK(std::string_view(table.decoy_hash()).starts_with("$argon2id$"));
  } catch (const Error& e) {
    WARDEN_FUZZ_CHECK(e.code() == Errc::invalid_argument);
    std::string_view message = e.what();
    const auto at = message.find(kFile);
    WARDEN_FUZZ_CHECK(at != std::string_view::npos);
    message.remove_prefix(at + kFile.size());
    WARDEN_FUZZ_CHECK(message.starts_with(":"));
    std::size_t line = 0;
    const auto [end, ec] =
        std::from_chars(message.data() + 1, message.data() + message.size(), line);
    WARDEN_FUZZ_CHECK(ec == std::errc() && line >= 1 && line <= count_lines(text));
    WARDEN_FUZZ_CHECK(std::string_view(end).starts_with(": "));
    WARDEN_FUZZ_CHECK(message.find("$argon2id$v=") == std::string_view::npos);
  }
}

// Every user the table holds is well-formed, found by name. Only for inputs that parse.
void check_users(std::string_view text) {
  UserTable table;
  try {
    table = parse_users(text, kFile);
  } catch (const Error&) {
    return;
  }
  // The names are the first field of every non-comment line.
  for (std::size_t pos = 0; pos < text.size();) {
    auto eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || line[first] == '#') continue;
    const auto end = line.find_first_of(" \t", first);
    const std::string_view name = line.substr(first, end - first);
    const User* user = table.find(name);
    WARDEN_FUZZ_CHECK(user != nullptr && user->name == name);
    WARDEN_FUZZ_CHECK(!name.empty() && name.size() <= 64 && name != "default");
    WARDEN_FUZZ_CHECK(std::string_view(user->hash).starts_with("$argon2id$"));
    WARDEN_FUZZ_CHECK(!user->groups.empty() && user->groups.size() <= kMaxPatternsPerUser);
    WARDEN_FUZZ_CHECK(user->rights != 0 && (user->rights & ~kAllRights) == 0);
  }
}

}  // namespace
}  // namespace warden::server

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace warden::server;
  // A copy of exactly `size` bytes, so reading past the input is a heap overflow that
  // AddressSanitizer reports.
  const std::string text(reinterpret_cast<const char*>(data), size);
  check(text);
  check_users(text);
  WARDEN_FUZZ_CHECK(outcome(text) == outcome(text));
  return 0;
}
