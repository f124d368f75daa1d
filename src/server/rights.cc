#include "server/rights.h"

namespace warden::server {

Rights required_right(std::string_view command) {
  // REVOKES and WAITS name no group: the lock right on any group is enough (the dispatcher checks
  // groups only for commands that name one).
  if (command == "ACQUIRE" || command == "ACQUIRESET" || command == "RENEW" ||
      command == "RELEASE" || command == "CHECK" || command == "PROCLAIM" || command == "REVOKES" ||
      command == "WAITS" || command == "WITHDRAW") {
    return kRightLock;
  }
  if (command == "INSPECT" || command == "LIST" || command == "INFO" || command == "WATCH") {
    return kRightInspect;
  }
  return 0;
}

bool has_right(Rights held, Rights needed) {
  if ((held & kRightAdmin) != 0) return true;
  return (held & needed) == needed;
}

std::string_view right_name(Rights right) {
  switch (right) {
    case kRightLock:
      return "lock";
    case kRightInspect:
      return "inspect";
    case kRightAdmin:
      return "admin";
    default:
      return "";
  }
}

bool glob_matches(std::string_view pattern, std::string_view group) {
  // The classic greedy matcher: remember the last `*` and where the text stood then;
  // on a mismatch let that `*` swallow one more character. Each text position is
  // revisited at most once per `*`, so a hostile pattern costs |pattern| * |group|.
  std::size_t p = 0;
  std::size_t g = 0;
  std::size_t star = std::string_view::npos;
  std::size_t resume = 0;
  while (g < group.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == group[g])) {
      ++p;
      ++g;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = g;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      g = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool any_matches(std::span<const std::string> patterns, std::string_view group) {
  for (const auto& pattern : patterns) {
    if (glob_matches(pattern, group)) return true;
  }
  return false;
}

}  // namespace warden::server
