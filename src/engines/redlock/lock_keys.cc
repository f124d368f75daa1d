#include "engines/redlock/lock_keys.h"

#include <algorithm>
#include <utility>

#include "engines/resp_client/glob.h"
#include "warden/error.h"

namespace warden::engines::redlock {
namespace {

constexpr std::string_view kGroup = "{group}";
constexpr std::string_view kName = "{name}";
constexpr std::string_view kFenceSuffix = ":warden-token";
constexpr std::string_view kWithdrawnInfix = ":warden-withdrawn:";

std::size_t count(std::string_view text, std::string_view part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string replaced(std::string text, std::string_view from, std::string_view to) {
  if (const auto at = text.find(from); at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

}  // namespace

KeyNaming KeyNaming::simple(std::string key_template) {
  const auto invalid = [&](const std::string& why) {
    throw Error(Errc::invalid_argument, "redis:// URI: lock_key='" + key_template + "': " + why);
  };
  if (count(key_template, kName) != 1) invalid("must hold {name} exactly once");
  if (count(key_template, kGroup) > 1) invalid("may hold {group} at most once");
  const std::string bare = replaced(replaced(key_template, kName, ""), kGroup, "");
  if (bare.find_first_of("{}") != std::string::npos) {
    invalid("a brace outside {group} and {name}");
  }
  return KeyNaming(std::move(key_template));
}

LockKeys KeyNaming::of(std::string_view group, std::string_view name) const {
  if (!template_) {
    const std::string tag = "{warden:" + std::string(group) + '/' + std::string(name) + '}';
    return LockKeys{tag + ":rl", tag + ":rf", tag + ":rx:"};
  }
  auto [before, after] = around_name(group);
  std::string lock = before + std::string(name) + after;
  // A lock whose key is another lock's counter or withdrawal mark ("n:warden-token" is
  // lock n's counter under {group}:{name}) would corrupt that lock's tokens.
  if (lock.ends_with(kFenceSuffix) || lock.find(kWithdrawnInfix) != std::string::npos) {
    throw Error(Errc::invalid_argument,
                "redis://…?layout=simple: lock '" + std::string(name) + "' has the key '" + lock +
                    "', which is the layout's own key beside another lock ('" +
                    std::string(kFenceSuffix.substr(1)) + "' or '" +
                    std::string(kWithdrawnInfix.substr(1, kWithdrawnInfix.size() - 2)) +
                    "'); choose another name");
  }
  std::string fence = lock + std::string(kFenceSuffix);
  std::string withdrawn = lock + std::string(kWithdrawnInfix);
  return LockKeys{std::move(lock), std::move(fence), std::move(withdrawn)};
}

std::pair<std::string, std::string> KeyNaming::around_name(std::string_view group) const {
  if (!template_) return {"{warden:" + std::string(group) + '/', "}:rl"};
  const std::string key = replaced(*template_, kGroup, group);
  const auto at = key.find(kName);
  return {key.substr(0, at), key.substr(at + kName.size())};
}

std::string KeyNaming::scan_pattern(std::string_view group) const {
  const auto [before, after] = around_name(group);
  return resp_client::glob_escaped(before) + "*" + resp_client::glob_escaped(after);
}

std::optional<std::string> KeyNaming::name_in(std::string_view key, std::string_view group) const {
  const auto [before, after] = around_name(group);
  if (key.size() <= before.size() + after.size() || !key.starts_with(before) ||
      !key.ends_with(after)) {
    return std::nullopt;
  }
  std::string name(key.substr(before.size(), key.size() - before.size() - after.size()));
  // The keys beside a lock key match its pattern too ("g:n:warden-token" is "g:{name}"
  // with the name "n:warden-token"); a lock named so is not listed.
  if (template_ &&
      (key.ends_with(kFenceSuffix) || key.find(kWithdrawnInfix) != std::string::npos)) {
    return std::nullopt;
  }
  return name;
}

}  // namespace warden::engines::redlock
