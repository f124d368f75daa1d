// core/uri.h — parsing of engine URIs:
//   scheme://[user[:password]@]host[:port][,host[:port]...][/path][?key=value&...]
// Percent-escapes (%XX) are decoded in user, password, path and query values. '@' may
// appear only in the user info: in a path or query it is written %40.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace warden::core {

struct HostPort {
  std::string host;
  std::optional<std::uint16_t> port;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

struct Uri {
  std::string scheme;  // lower case
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::vector<HostPort> hosts;  // may be empty ("mem://")
  std::string path;             // without the leading '/'; may be empty
  std::map<std::string, std::string> query;

  // Throws Error(invalid_argument) naming what is wrong.
  static Uri parse(std::string_view text);
  // The URI without its password, for logs and error messages.
  std::string redacted() const;
};

// A decimal integer in [low, high] that is all of `text`; nullopt otherwise (URI query
// values such as pool=N).
std::optional<std::int64_t> parse_int_in_range(std::string_view text, std::int64_t low,
                                               std::int64_t high);

}  // namespace warden::core
