// server/rights.h — what a wardend user may do: rights over commands, group patterns over
// locks. Pure functions, no state; the dispatcher asks them before every command.
//
//   right    commands
//   lock     ACQUIRE ACQUIRESET RENEW RELEASE CHECK PROCLAIM  (on groups matching the patterns),
//            REVOKES (names no group: the right on any group is enough)
//   inspect  INSPECT LIST WATCH (on matching groups), INFO
//   admin    every command, including admin-only ones to come; implies lock and inspect
//   (none)   PING HELLO AUTH QUIT, and commands the server does not know (answered ERR)
//
// Group patterns are globs over group names: `*` matches any run of characters (also
// none), `?` exactly one; every other character matches itself. Patterns limit every
// command that names a group, admin's too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace warden::server {

// A set of rights as bits.
using Rights = std::uint8_t;
inline constexpr Rights kRightLock = 1;
inline constexpr Rights kRightInspect = 2;
inline constexpr Rights kRightAdmin = 4;
inline constexpr Rights kAllRights = kRightLock | kRightInspect | kRightAdmin;

// The right a command (upper-case name) needs: 0 for the ones anyone authenticated may
// send (PING, HELLO, AUTH, QUIT) and for unknown names, which get their own error.
Rights required_right(std::string_view command);

// true iff `held` includes `needed` (admin includes everything).
bool has_right(Rights held, Rights needed);

// "lock", "inspect", "admin" (for messages); "" for anything else.
std::string_view right_name(Rights right);

// true iff `group` matches the glob `pattern` (`*` any run, `?` one character). Linear
// in |pattern| * |group| at worst, without recursion, whatever the pattern.
bool glob_matches(std::string_view pattern, std::string_view group);

// true iff some pattern matches `group`.
bool any_matches(std::span<const std::string> patterns, std::string_view group);

}  // namespace warden::server
