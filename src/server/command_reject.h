// server/command_reject.h — how a wardend command refuses: a Reject thrown inside the
// command becomes one error reply (`-CODE message`) and never leaves the dispatcher.
#pragma once

#include <cctype>
#include <span>
#include <string>
#include <string_view>

namespace warden::server {

struct Reject {
  std::string code;
  std::string message;
};

inline std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// ERR wrong number of arguments, unless min <= args.size() <= max.
inline void arity(std::span<const std::string_view> args, std::size_t min, std::size_t max) {
  if (args.size() < min || args.size() > max) {
    throw Reject{"ERR", "wrong number of arguments for '" + upper(args[0]) + "'"};
  }
}

}  // namespace warden::server
