// engines/redlock/lock_keys.h — where a lock lives on each master.
//
// Two namings:
//
//   tagged (redlock://)       {warden:GROUP/NAME}:rl, :rf and :rx:OWNER: one hash tag,
//                             beside redis://'s keys of the same lock
//   simple (redis://…?layout=simple)
//                             the lock key is a template's expansion, by default
//                             GROUP:NAME, the key redis-py's Lock and any other
//                             SET NX PX lock on that name use; beside it
//                             KEY:warden-token (the fencing counter) and
//                             KEY:warden-withdrawn:OWNER
//
// The scripts (lua/owner.lua) take the keys as arguments, so both namings run the same
// algorithm; only the names differ.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace warden::engines::redlock {

// The keys of one lock.
struct LockKeys {
  std::string lock;   // the grant: "OWNER", then "OWNER:TOKEN"
  std::string fence;  // the lock's last token
  std::string withdrawn_prefix;

  // The mark of an attempt withdrawn before its vote arrived.
  std::string withdrawn(const std::string& owner) const { return withdrawn_prefix + owner; }
};

class KeyNaming {
 public:
  static constexpr std::string_view kDefaultTemplate = "{group}:{name}";

  // redlock://'s own keys.
  static KeyNaming tagged() { return KeyNaming(std::nullopt); }
  // The classic lock's key: `key_template` with "{group}" and "{name}" replaced. Throws
  // Error(invalid_argument) unless it holds "{name}" once, "{group}" at most once, and
  // no other brace.
  static KeyNaming simple(std::string key_template);

  bool is_simple() const { return template_.has_value(); }
  LockKeys of(std::string_view group, std::string_view name) const;

  // A SCAN pattern matching every lock key of `group` (and maybe other keys), and the
  // lock name in a key it returned: nullopt for a key that is not a lock key of `group`,
  // such as a counter or withdrawal mark beside one.
  std::string scan_pattern(std::string_view group) const;
  std::optional<std::string> name_in(std::string_view key, std::string_view group) const;

 private:
  explicit KeyNaming(std::optional<std::string> key_template)
      : template_(std::move(key_template)) {}

  // The lock key of `group` split around where the name goes.
  std::pair<std::string, std::string> around_name(std::string_view group) const;

  std::optional<std::string> template_;
};

}  // namespace warden::engines::redlock
