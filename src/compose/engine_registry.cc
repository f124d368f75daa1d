#include "compose/engine_registry.h"

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/tls_options.h"
#include "engines/mem/mem_engine.h"
#include "engines/warden/warden_engine.h"
#include "warden/error.h"

namespace warden::compose {
namespace {

struct SchemeOf {
  std::string_view scheme;
  std::string_view component;
};

// Every scheme warden knows, built into this program or not, so that a scheme whose
// component is absent gets a message that names it rather than "unknown scheme".
constexpr std::array kSchemes{
    SchemeOf{"mem", "core"},
    SchemeOf{"warden", "core"},
    SchemeOf{"wardens", "core"},
    SchemeOf{"redis", "redis"},
    SchemeOf{"rediss", "redis"},
    SchemeOf{"redis+sentinel", "redis"},
    SchemeOf{"redis+cluster", "redis"},
    SchemeOf{"redlock", "redis"},
    SchemeOf{"etcd", "etcd"},
    SchemeOf{"etcds", "etcd"},
    SchemeOf{"zk", "zookeeper"},
    SchemeOf{"postgres", "postgres"},
    SchemeOf{"postgresql", "postgres"},
    SchemeOf{"mysql", "mysql"},
};

constexpr std::array<std::string_view, 5> kEngineComponents{"redis", "etcd", "zookeeper",
                                                            "postgres", "mysql"};

// WARDEN_BUILT_ENGINES (src/compose/CMakeLists.txt): the components of the build this
// library came from, space-separated.
constexpr std::string_view kBuiltEngines = WARDEN_BUILT_ENGINES;

bool built_with(std::string_view component) {
  std::string_view rest = kBuiltEngines;
  while (!rest.empty()) {
    const auto space = rest.find(' ');
    if (rest.substr(0, space) == component) return true;
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space + 1);
  }
  return false;
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, EngineOpener, std::less<>> openers;
  std::map<std::string, std::string, std::less<>> absent_because;
  ComponentLoader loader = nullptr;
  // One per component the loader was asked for (map nodes stay put, so a flag can be
  // used outside the lock): the loader runs without the lock, as the library it loads
  // registers itself from its static initialisers.
  std::map<std::string, std::once_flag, std::less<>> load_once;
};

// A function-local static: a component's library registers from its own static
// initialisers, which may run before this library's (never, by the loader's order of
// dependencies, but nothing here relies on it).
Registry& registry() {
  static Registry instance;
  return instance;
}

std::string known_schemes() {
  std::string text;
  for (const SchemeOf& s : kSchemes) text += (text.empty() ? "" : ", ") + std::string(s.scheme);
  return text;
}

std::string absent_text(std::string_view scheme, std::string_view component,
                        const std::string& noted) {
  const std::string name(component);
  std::string text = std::string(scheme) + ":// is served by warden's " + name +
                     " engine, which this program does not have: it comes with libwarden-" + name +
                     " (Debian package libwarden-" + name + "0; CMake component " +
                     "warden::" + name + ", pkg-config warden-" + name + ")";
  if (!built_with(component)) {
    text += "; this warden was built without it (WARDEN_ENGINES=\"" + std::string(kBuiltEngines) +
            "\")";
  }
  if (!noted.empty()) text += "; " + noted;
  return text;
}

std::string noted_about(std::string_view component) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const auto it = r.absent_because.find(component);
  return it == r.absent_because.end() ? std::string() : it->second;
}

}  // namespace

std::string_view component_of(std::string_view scheme) {
  for (const SchemeOf& s : kSchemes) {
    if (s.scheme == scheme) return s.component;
  }
  return {};
}

std::span<const std::string_view> engine_components() { return kEngineComponents; }

void register_component(std::string_view component, EngineOpener open) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.openers.emplace(std::string(component), open);
}

void withdraw_component(std::string_view component) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  if (const auto it = r.openers.find(component); it != r.openers.end()) r.openers.erase(it);
}

bool has_component(std::string_view component) {
  if (component == "core") return true;
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return r.openers.find(component) != r.openers.end();
}

void set_component_loader(ComponentLoader load) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.loader = load;
}

bool load_component(std::string_view component) {
  if (has_component(component)) return true;
  Registry& r = registry();
  ComponentLoader load = nullptr;
  std::once_flag* once = nullptr;
  {
    const std::lock_guard lock(r.mutex);
    if (r.loader == nullptr) return false;
    load = r.loader;
    once = &r.load_once.try_emplace(std::string(component)).first->second;
  }
  std::call_once(*once, load, component);
  return has_component(component);
}

void note_absent_component(std::string_view component, std::string why) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.absent_because.insert_or_assign(std::string(component), std::move(why));
}

std::string describe_absent(std::string_view scheme) {
  const std::string_view component = component_of(scheme);
  if (component.empty()) return "unknown URI scheme '" + std::string(scheme) + "'";
  return absent_text(scheme, component, noted_about(component));
}

std::unique_ptr<core::Engine> open_engine(const core::Uri& given, const ClientOptions& options) {
  const std::string_view component = component_of(given.scheme);
  if (component.empty()) {
    throw Error(Errc::invalid_argument, "unknown URI scheme '" + given.scheme +
                                            "' (warden knows: " + known_schemes() + ")");
  }
  core::Uri uri = given;
  core::resolve_tls_scheme(uri);  // rediss:// is redis://?tls=1, and so on
  if (uri.scheme == "mem") return engines::mem::open(uri, options);
  if (uri.scheme == "warden") return engines::wardend::open(uri, options);

  EngineOpener open = nullptr;
  (void)load_component(component);
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    if (const auto it = r.openers.find(component); it != r.openers.end()) open = it->second;
  }
  if (open == nullptr) {
    throw Error(Errc::unsupported, absent_text(given.scheme, component, noted_about(component)));
  }
  return open(uri, options);
}

}  // namespace warden::compose
